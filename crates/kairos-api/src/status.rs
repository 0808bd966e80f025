//! Executor routes (role `executor`): `POST /runs/{key}/status`, `POST /runs/status` (a
//! batch of reports, answered item by item) and `POST /run-launcher/start`, and the operator's `POST /runs/{key}/cancel` (role `deployer`),
//! all through the worker's run intake (`kairos_worker::intake`),
//! which holds the field rules and the state machine; this module checks the batch body's
//! shape, maps answers to HTTP and counts requests.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::Json;
use kairos_registrar::{Error as RegistrarError, Problem};
use kairos_store::cancel::Cancel;
use kairos_store::status::Applied;
use kairos_worker::intake::{self, Error as IntakeError, Item, StartRequest};
use serde_json::{json, Value};

use crate::access::Caller;
use crate::body::{self, Fields};
use crate::error::bad_request;
use crate::error::ApiError;
use crate::wire::RunBody;
use crate::AppState;

/// `POST /runs/{key}/status`: `{status, run_id?, executor_id?, error?}` → the run. A report
/// the state machine refuses is a 409 naming why; an unknown key a 404.
pub(crate) async fn report(
    State(state): State<AppState>,
    Path(key): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<RunBody>, ApiError> {
    let body = body::json(body, state.max_body_bytes)?;
    let report = match intake::parse_report(&key, &body) {
        Ok(report) => report,
        Err(problems) => {
            kairos_worker::metrics::status_event(
                kairos_worker::metrics::UNKNOWN_STATUS,
                kairos_worker::metrics::StatusOutcome::Invalid,
            );
            return Err(ApiError::BadRequest(problems));
        }
    };
    let applied = state.intake.report(&key, &report).await.map_err(internal)?;
    answer(&key, applied).map(Json)
}

/// Most reports one `POST /runs/status` may carry.
pub const MAX_BATCH_REPORTS: usize = 1_000;

/// `POST /runs/status`: an array of up to [`MAX_BATCH_REPORTS`] status reports, each with
/// its `idempotency_key`, applied as `POST /runs/{key}/status` would apply each (in their
/// order where they name one run) → an array with one answer per report, in order: `{status:
/// 200, run}`, or `{status, problem}` with the problem document the single route would
/// answer. A report that is refused is answered alone; the others still apply.
pub(crate) async fn report_many(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let entries = match body::json(body, state.max_body_bytes)? {
        Value::Array(entries) if (1..=MAX_BATCH_REPORTS).contains(&entries.len()) => entries,
        _ => {
            return Err(ApiError::BadRequest(vec![Problem::new(
                "body",
                format!("must be an array of 1 to {MAX_BATCH_REPORTS} status reports"),
            )]))
        }
    };
    let mut answers: Vec<Option<Value>> = vec![None; entries.len()];
    let mut items = Vec::with_capacity(entries.len());
    let mut positions = Vec::with_capacity(entries.len());
    for (position, entry) in entries.iter().enumerate() {
        match read_batch_entry(position, entry) {
            Ok(item) => {
                items.push(item);
                positions.push(position);
            }
            Err(problems) => {
                kairos_worker::metrics::status_event(
                    kairos_worker::metrics::UNKNOWN_STATUS,
                    kairos_worker::metrics::StatusOutcome::Invalid,
                );
                answers[position] = Some(refused(ApiError::BadRequest(problems)).await);
            }
        }
    }
    let keys: Vec<String> = items.iter().map(|item| item.key.clone()).collect();
    let applied = state.intake.report_many(items).await;
    for ((position, key), applied) in positions.into_iter().zip(keys).zip(applied) {
        let answered = applied
            .map_err(internal)
            .and_then(|applied| answer(&key, applied));
        answers[position] = Some(match answered {
            Ok(run) => json!({"status": 200, "run": run}),
            Err(err) => refused(err).await,
        });
    }
    Ok(Json(answers.into_iter().flatten().collect()))
}

/// One entry of a batch: its key from the body, then the single route's rules; problems
/// name the entry (`[3].status`).
fn read_batch_entry(position: usize, entry: &Value) -> Result<Item, Vec<Problem>> {
    let name =
        |problem: Problem| Problem::new(format!("[{position}].{}", problem.field), problem.rule);
    let key = match entry.get("idempotency_key") {
        Some(Value::String(key)) => key.clone(),
        _ => {
            return Err(vec![name(Problem::new(
                "idempotency_key",
                "is required in each report of a batch (a string: the run's key)",
            ))])
        }
    };
    intake::parse_report(&key, entry)
        .map(|report| Item { key, report })
        .map_err(|problems| problems.into_iter().map(name).collect())
}

/// The answer of the single route to an applied report: the run, or the refusal.
fn answer(key: &str, applied: Applied) -> Result<RunBody, ApiError> {
    match applied {
        Applied::Moved(run) | Applied::Unchanged(run) => Ok(RunBody::of(run)),
        Applied::NotFound => Err(ApiError::Registrar(RegistrarError::NotFound {
            what: format!("run {key:?}"),
        })),
        refused => Err(ApiError::Registrar(RegistrarError::Conflict {
            detail: intake::refusal(&refused),
        })),
    }
}

/// A refusal as one batch answer: `{status, problem}`, the problem document exactly as the
/// single route would send it (the one mapping in `error.rs`).
async fn refused(err: ApiError) -> Value {
    let response = err.into_response();
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    let problem: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    json!({"status": status, "problem": problem})
}

/// `POST /run-launcher/start`: `{workflow_id, version, user_id, scheduled_for,
/// idempotency_key}` → `{started, status}` (`started` false when the key existed).
pub(crate) async fn start(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let request = read_start(body::json(body, state.max_body_bytes)?)?;
    match state.intake.start(&request).await {
        Ok(started) => Ok(Json(
            json!({ "started": started.started, "status": started.status.as_str() }),
        )),
        Err(IntakeError::WorkflowNotFound {
            workflow_id,
            version,
        }) => Err(ApiError::Registrar(RegistrarError::NotFound {
            what: format!("workflow {workflow_id:?} version {version}"),
        })),
        Err(IntakeError::KeyInUse { key }) => Err(ApiError::Registrar(RegistrarError::Conflict {
            detail: format!("idempotency_key {key:?} already names a different run"),
        })),
        Err(err) => Err(internal(err)),
    }
}

/// `POST /runs/{key}/cancel` `{reason?}` (role `deployer`) → 200 with the run and
/// `cancel`: `cancelled` (it was not published: cancelled at once), `cancelling` (the
/// executor is told; it becomes `CANCELLED` when it confirms or the cancel times out),
/// `already_cancelling`, or `already_finished` (it had reached a final status first; not an
/// error), with a `message` saying so. An unknown key is a 404.
pub(crate) async fn cancel(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Path(key): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let body = match body {
        Ok(bytes) if bytes.is_empty() => Ok(Bytes::from_static(b"{}")),
        other => other,
    };
    let reason = read_cancel(body::json(body, state.max_body_bytes)?)?;
    let done = state
        .intake
        .cancel_by(&key, reason.as_deref(), &actor)
        .await
        .map_err(internal)?;
    let Some(run) = done.run().cloned() else {
        return Err(ApiError::Registrar(RegistrarError::NotFound {
            what: format!("run {key:?}"),
        }));
    };
    let message = match &done {
        Cancel::Cancelled(_) => "the run was not published; it is cancelled".to_string(),
        Cancel::Cancelling(_) => "the executor is asked to stop the run; it becomes \
            CANCELLED when the executor confirms or the cancel times out"
            .to_string(),
        Cancel::AlreadyCancelling(_) => "a cancel of this run is already in progress".into(),
        Cancel::Finished(run) => format!(
            "the run had already finished ({}); nothing was cancelled",
            run.status
        ),
        Cancel::NotFound => unreachable!("handled above"),
    };
    let mut body = serde_json::to_value(RunBody::of(run)).expect("runs serialize");
    body["cancel"] = json!(done.kind());
    body["message"] = json!(message);
    Ok(Json(body))
}

/// A store failure of the intake: logged by the error mapping, answered 500.
fn internal(err: IntakeError) -> ApiError {
    match err {
        IntakeError::Store(err) => ApiError::Registrar(RegistrarError::Store(err)),
        other => ApiError::Unavailable(other.to_string()),
    }
}

/// Reads a `POST /run-launcher/start` body; every problem at once.
pub(crate) fn read_start(body: Value) -> Result<StartRequest, ApiError> {
    let mut fields = Fields::new(body, "");
    let workflow_id = fields.string("workflow_id", true);
    let version = fields.integer("version", true);
    let user_id = fields.string("user_id", true);
    let scheduled_for = fields.time("scheduled_for", true);
    let key = fields.string("idempotency_key", true);
    let mut problems = fields.finish();
    for (field, value) in [("workflow_id", &workflow_id), ("user_id", &user_id)] {
        if let Some(Err(rule)) = value.as_deref().map(|v| kairos_core::validate_id(field, v)) {
            problems.push(Problem::new(field, rule.to_string()));
        }
    }
    problems.extend(key.as_deref().and_then(intake::check_start_key));
    if version.is_some_and(|v| !(0..=i64::from(i32::MAX)).contains(&v)) {
        problems.push(Problem::new("version", "must be between 0 and 2147483647"));
    }
    if scheduled_for.is_some_and(|at| at.timestamp_subsec_nanos() != 0) {
        problems.push(Problem::new("scheduled_for", "must be whole seconds"));
    }
    bad_request(problems)?;
    Ok(StartRequest {
        idempotency_key: key.unwrap_or_default(),
        workflow_id: workflow_id.unwrap_or_default(),
        version: i32::try_from(version.unwrap_or_default()).unwrap_or_default(),
        user_id: user_id.unwrap_or_default(),
        scheduled_for: scheduled_for.expect("checked above"),
    })
}

/// Reads a cancel body `{reason?}` (an empty body is `{}`).
pub(crate) fn read_cancel(body: Value) -> Result<Option<String>, ApiError> {
    let mut fields = Fields::new(body, "");
    let reason = fields.string("reason", false);
    let mut problems = fields.finish();
    if reason
        .as_deref()
        .is_some_and(|r| r.chars().count() > intake::MAX_REASON_TEXT)
    {
        problems.push(Problem::new(
            "reason",
            format!("must be at most {} characters", intake::MAX_REASON_TEXT),
        ));
    }
    bad_request(problems)?;
    Ok(reason)
}
