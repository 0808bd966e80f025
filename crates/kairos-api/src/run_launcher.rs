//! `POST /run-launcher/start` (role `executor`): a run an executor starts by itself, through
//! the worker's run intake, published at once.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use kairos_registrar::{Error as RegistrarError, Problem};
use kairos_worker::intake::{self, Error as IntakeError, StartRequest};
use serde_json::Value;

use crate::body::{self, Fields};
use crate::error::{bad_request, intake_failed, ApiError};
use crate::AppState;

/// The answer to a start: whether this call created the run, and its status.
#[derive(Debug, serde::Serialize)]
pub(crate) struct StartedBody {
    started: bool,
    status: &'static str,
}

/// `POST /run-launcher/start`: `{workflow_id, version, user_id, scheduled_for,
/// idempotency_key}` → `{started, status}` (`started` false when the key existed).
pub(crate) async fn start(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<StartedBody>, ApiError> {
    let request = read_start(body::json(body, state.max_body_bytes)?)?;
    match state.intake.start(&request).await {
        Ok(started) => Ok(Json(StartedBody {
            started: started.started,
            status: started.status.as_str(),
        })),
        Err(IntakeError::WorkflowNotFound {
            workflow_id,
            version,
        }) => Err(ApiError::Registrar(RegistrarError::NotFound {
            what: format!("workflow {workflow_id:?} version {version}"),
        })),
        Err(IntakeError::KeyInUse { key }) => Err(ApiError::Registrar(RegistrarError::Conflict {
            detail: format!("idempotency_key {key:?} already names a different run"),
        })),
        Err(err) => Err(intake_failed(err)),
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
