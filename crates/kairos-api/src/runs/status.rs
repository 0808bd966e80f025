//! The executor's status reports (role `executor`): `POST /runs/{key}/status` and
//! `POST /runs/status` (a batch of reports, answered item by item), through the worker's run
//! intake (`kairos_worker::intake`), which holds the field rules and the state machine; this
//! module checks the batch body's shape, maps answers to HTTP and counts requests.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::Json;
use kairos_registrar::{Error as RegistrarError, Problem};
use kairos_worker::intake::Applied;
use kairos_worker::intake::{self, Item};
use serde_json::Value;

use crate::body::{self};
use crate::error::{intake_failed, ApiError};
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
    let applied = state
        .intake
        .report(&key, &report)
        .await
        .map_err(intake_failed)?;
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
) -> Result<Json<Vec<BatchAnswer>>, ApiError> {
    let entries = match body::json(body, state.max_body_bytes)? {
        Value::Array(entries) if (1..=MAX_BATCH_REPORTS).contains(&entries.len()) => entries,
        _ => {
            return Err(ApiError::BadRequest(vec![Problem::new(
                "body",
                format!("must be an array of 1 to {MAX_BATCH_REPORTS} status reports"),
            )]))
        }
    };
    let mut answers: Vec<Option<BatchAnswer>> = (0..entries.len()).map(|_| None).collect();
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
            .map_err(intake_failed)
            .and_then(|applied| answer(&key, applied));
        answers[position] = Some(match answered {
            Ok(run) => BatchAnswer {
                status: 200,
                run: Some(run),
                problem: None,
            },
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

/// One answer of `POST /runs/status`: the status code the single route would answer, with
/// the run (200) or the problem document.
#[derive(Debug, serde::Serialize)]
pub(crate) struct BatchAnswer {
    status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    run: Option<RunBody>,
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<Value>,
}

/// A refusal as one batch answer: `{status, problem}`, the problem document exactly as the
/// single route would send it (the one mapping in `error.rs`).
async fn refused(err: ApiError) -> BatchAnswer {
    let response = err.into_response();
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    let problem: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    BatchAnswer {
        status,
        run: None,
        problem: Some(problem),
    }
}
