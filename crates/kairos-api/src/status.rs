//! Executor routes (role `executor`): `POST /runs/{key}/status` (the forward-only state
//! machine of `kairos_store::status`) and `POST /run-launcher/start` (start a run by key,
//! idempotently, through the dispatcher).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::Json;
use kairos_registrar::{Error as RegistrarError, Problem};
use kairos_store::status::{Applied, Reported, StatusReport};
use kairos_worker::dispatcher::{Error as DispatchError, StartRequest};
use kairos_worker::metrics::{record_status, StatusOutcome};
use serde_json::{json, Value};

use crate::body::{self, Fields};
use crate::error::ApiError;
use crate::schedules::bad_request;
use crate::wire::RunBody;
use crate::AppState;

/// Whether `key` is an id (`^[A-Za-z0-9_-]{1,200}$`).
fn valid_key(key: &str) -> bool {
    kairos_launcher::status::valid_key(key)
}

/// `POST /runs/{key}/status`: `{status, run_id?, executor_id?, error?}` → the run.
pub(crate) async fn report(
    State(state): State<AppState>,
    Path(key): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<RunBody>, ApiError> {
    let mut fields = Fields::new(body::json(body, state.max_body_bytes)?, "");
    let status = fields.string("status", true);
    let body_key = fields.string("idempotency_key", false);
    let run_id = fields.string("run_id", false);
    let executor_id = fields.string("executor_id", false);
    let error = fields.string("error", false);
    let mut problems = fields.finish();
    if !valid_key(&key) {
        problems.push(Problem::new("key", "must match ^[A-Za-z0-9_-]{1,200}$"));
    }
    if body_key.as_ref().is_some_and(|k| *k != key) {
        problems.push(Problem::new(
            "idempotency_key",
            "must equal the key in the path",
        ));
    }
    let reported = status.as_deref().and_then(Reported::parse);
    if status.is_some() && reported.is_none() {
        problems.push(Problem::new("status", "must be STARTED, SUCCESS or FAILED"));
    }
    for (field, value, max) in [("run_id", &run_id, 200), ("executor_id", &executor_id, 200)] {
        if value
            .as_ref()
            .is_some_and(|v| v.is_empty() || v.len() > max)
        {
            problems.push(Problem::new(
                field,
                format!("must be 1 to {max} characters"),
            ));
        }
    }
    if error.as_ref().is_some_and(|e| e.len() > 8192) {
        problems.push(Problem::new("error", "must be at most 8192 characters"));
    }
    bad_request(problems)?;
    let report = StatusReport {
        status: reported.expect("status is valid when there is no problem"),
        run_id,
        executor_id,
        error,
    };
    let mut conn = state
        .registrar
        .pool()
        .acquire()
        .await
        .map_err(RegistrarError::from)?;
    let applied = kairos_store::status::apply(&mut conn, &key, &report, None)
        .await
        .map_err(RegistrarError::from)?;
    record_status(report.status.as_str(), outcome_of(&applied));
    match applied {
        Applied::Moved(run) | Applied::Unchanged(run) => Ok(Json(RunBody::of(run))),
        Applied::Conflict { owner, .. } => Err(ApiError::Registrar(RegistrarError::Conflict {
            detail: format!("run {key} is owned by executor {owner:?}"),
        })),
        Applied::NotFound => Err(ApiError::Registrar(RegistrarError::NotFound {
            what: format!("run {key:?}"),
        })),
    }
}

/// The metric outcome of an applied report.
fn outcome_of(applied: &Applied) -> StatusOutcome {
    match applied {
        Applied::Moved(_) => StatusOutcome::Applied,
        Applied::Unchanged(_) => StatusOutcome::Unchanged,
        Applied::Conflict { .. } => StatusOutcome::Conflict,
        Applied::NotFound => StatusOutcome::UnknownRun,
    }
}

/// `POST /run-launcher/start`: `{workflow_id, version, user_id, scheduled_for,
/// idempotency_key}` → `{started, status}` (`started` false when the key existed).
pub(crate) async fn start(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let mut fields = Fields::new(body::json(body, state.max_body_bytes)?, "");
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
    if let Some(key) = &key {
        if !valid_key(key) {
            problems.push(Problem::new(
                "idempotency_key",
                "must match ^[A-Za-z0-9_-]{1,200}$",
            ));
        } else if key.len() == 64 && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            problems.push(Problem::new(
                "idempotency_key",
                "64 lowercase hex digits are reserved for keys kairos derives",
            ));
        }
    }
    if version.is_some_and(|v| !(0..=i64::from(i32::MAX)).contains(&v)) {
        problems.push(Problem::new("version", "must be between 0 and 2147483647"));
    }
    if scheduled_for.is_some_and(|at| at.timestamp_subsec_nanos() != 0) {
        problems.push(Problem::new("scheduled_for", "must be whole seconds"));
    }
    bad_request(problems)?;
    let Some(dispatcher) = &state.dispatcher else {
        return Err(ApiError::Unavailable(
            "this instance has no launcher (nats) configured".into(),
        ));
    };
    let request = StartRequest {
        idempotency_key: key.unwrap_or_default(),
        workflow_id: workflow_id.unwrap_or_default(),
        version: i32::try_from(version.unwrap_or_default()).unwrap_or_default(),
        user_id: user_id.unwrap_or_default(),
        scheduled_for: scheduled_for.expect("checked above"),
    };
    match dispatcher.start_run(&request).await {
        Ok(started) => Ok(Json(
            json!({ "started": started.started, "status": started.status }),
        )),
        Err(DispatchError::WorkflowNotFound {
            workflow_id,
            version,
        }) => Err(ApiError::Registrar(RegistrarError::NotFound {
            what: format!("workflow {workflow_id:?} version {version}"),
        })),
        Err(DispatchError::KeyInUse { key }) => {
            Err(ApiError::Registrar(RegistrarError::Conflict {
                detail: format!("idempotency_key {key:?} already names a different run"),
            }))
        }
        Err(DispatchError::Store(err)) => Err(ApiError::Registrar(RegistrarError::Store(err))),
        Err(err) => Err(ApiError::Unavailable(err.to_string())),
    }
}
