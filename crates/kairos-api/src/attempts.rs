//! Handlers of a run's attempts: `GET /runs/{key}` (the run and the history of its
//! attempts), `POST /runs/{key}/retry` (one more attempt of a finished run),
//! `GET /dead-letters` (runs whose last attempt failed, newest first) and `GET /runs?late=true`
//! (runs not `SUCCESS` by their deadline, newest mark first).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::Json;
use kairos_registrar::{DeadLetterQuery, RunView};
use serde_json::json;

use crate::access::Caller;
use crate::body::{self, Fields};
use crate::error::bad_request;
use crate::error::ApiError;
use crate::wire::{AttemptBody, RunBody};
use crate::AppState;

/// `GET /runs/{key}` → the run with `max_attempts` and `history`.
pub(crate) async fn get(
    State(state): State<AppState>,
    Path(key): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let RunView {
        run,
        history,
        max_attempts,
    } = state.registrar.run(&key).await?;
    let history: Vec<AttemptBody> = history.into_iter().map(AttemptBody::of).collect();
    let mut body = serde_json::to_value(RunBody::of(run)).expect("runs serialize");
    body["max_attempts"] = json!(max_attempts);
    body["history"] = json!(history);
    Ok(Json(body))
}

/// `POST /runs/{key}/retry` `{request_id?}` → 201 with the run whose next attempt is due
/// now, or 200 with the run this request id retried before. Without a request id, every
/// call is a new request.
pub(crate) async fn retry(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Path(key): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = match body {
        Ok(bytes) if bytes.is_empty() => Ok(Bytes::from_static(b"{}")),
        other => other,
    };
    let request_id = read_retry(body::json(body, state.max_body_bytes)?)?;
    let request_id = request_id.unwrap_or_else(fresh_request_id);
    let (run, started) = state
        .registrar
        .acting_as(actor)
        .retry(&key, &request_id)
        .await?;
    let location = format!("/runs/{}", run.idempotency_key);
    Ok(crate::wire::written(
        started,
        location,
        Json(RunBody::of(run)),
    ))
}

/// `GET /dead-letters?schedule_id=&workflow_id=&limit=&cursor=` → `{runs, next_cursor}`.
pub(crate) async fn dead_letters(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let mut query = body::Query::new(params);
    let filter = DeadLetterQuery {
        schedule_id: query.text("schedule_id"),
        workflow_id: query.text("workflow_id"),
        cursor: query.text("cursor"),
        limit: query.integer("limit", 100),
    };
    query.finish()?;
    let page = state.registrar.dead_letters(&filter).await?;
    let runs: Vec<RunBody> = page.runs.into_iter().map(RunBody::of).collect();
    Ok(Json(
        json!({ "runs": runs, "next_cursor": page.next_cursor }),
    ))
}

/// `GET /runs?late=true&schedule_id=&workflow_id=&limit=&cursor=` → `{runs, next_cursor}`:
/// late runs, newest mark first. `late` is required and only `true` is known: the
/// listing is of late runs.
pub(crate) async fn list(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let late_given = params.contains_key("late");
    let mut query = body::Query::new(params);
    let late = query.boolean("late");
    let filter = DeadLetterQuery {
        schedule_id: query.text("schedule_id"),
        workflow_id: query.text("workflow_id"),
        cursor: query.text("cursor"),
        limit: query.integer("limit", 100),
    };
    let late_problem = match late {
        Some(true) => None,
        Some(false) => Some("only true is known: GET /runs lists late runs"),
        None if !late_given => Some("is required (late=true: GET /runs lists late runs)"),
        // Not true or false: named by the reading above.
        None => None,
    };
    let finished = query.finish();
    if let Some(detail) = late_problem {
        let mut problems = match finished {
            Err(ApiError::BadRequest(problems)) => problems,
            _ => Vec::new(),
        };
        problems.insert(0, kairos_registrar::Problem::new("late", detail));
        return Err(ApiError::BadRequest(problems));
    }
    finished?;
    let page = state.registrar.late_runs(&filter).await?;
    let runs: Vec<RunBody> = page.runs.into_iter().map(RunBody::of).collect();
    Ok(Json(
        json!({ "runs": runs, "next_cursor": page.next_cursor }),
    ))
}

/// A request id unique to this call (a retry without one is never de-duplicated).
fn fresh_request_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "api-{nanos}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Reads a retry body `{request_id?}` (an empty body is `{}`).
pub(crate) fn read_retry(body: serde_json::Value) -> Result<Option<String>, ApiError> {
    let mut fields = Fields::new(body, "");
    let request_id = fields.string("request_id", false);
    bad_request(fields.finish())?;
    Ok(request_id)
}
