//! Handlers of `/schedules/{id}/skips`: skipping one occurrence of a schedule, listing its
//! skips, and taking one back before its tick.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use kairos_registrar::rfc3339;
use serde_json::{json, Value};

use crate::access::Caller;
use crate::body::{self, Fields};
use crate::error::bad_request;
use crate::error::ApiError;
use crate::wire::{SkipBody, SkipsBody};
use crate::AppState;

/// `POST /schedules/{id}/skips` `{run_at, note?}` → 201 with the skip.
pub(crate) async fn create(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Caller(actor): Caller,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (run_at, note) = read_skip(body::json(body, state.max_body_bytes)?)?;
    let skip = state
        .registrar
        .acting_as(actor.clone())
        .skip(&id, run_at, note.as_deref(), &actor.name)
        .await?;
    let location = format!("/schedules/{id}/skips/{}", rfc3339(skip.run_at));
    Ok(crate::wire::written(
        true,
        location,
        Json(SkipBody::of(skip)),
    ))
}

/// `GET /schedules/{id}/skips` → `{skips: [...]}`, past and future, in tick order.
pub(crate) async fn list(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SkipsBody>, ApiError> {
    let skips: Vec<SkipBody> = state
        .registrar
        .skips(&id)
        .await?
        .into_iter()
        .map(SkipBody::of)
        .collect();
    Ok(Json(SkipsBody { skips }))
}

/// `DELETE /schedules/{id}/skips/{run_at}` → 204: the tick runs again (before it fires).
pub(crate) async fn delete(
    State(state): State<AppState>,
    Path((id, run_at)): Path<(String, String)>,
    Caller(actor): Caller,
) -> Result<Response, ApiError> {
    let run_at = read_run_at(&run_at)?;
    state
        .registrar
        .acting_as(actor.clone())
        .unskip(&id, run_at, &actor.name)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Reads a skip body: `(run_at, note)`.
pub(crate) fn read_skip(body: Value) -> Result<(DateTime<Utc>, Option<String>), ApiError> {
    let mut fields = Fields::new(body, "");
    let run_at = fields.time("run_at", true);
    let note = fields.string("note", false);
    bad_request(fields.finish())?;
    let run_at = run_at.expect("required fields are present when there is no problem");
    Ok((run_at, note))
}

/// The `{run_at}` of a path: an RFC 3339 time.
fn read_run_at(text: &str) -> Result<DateTime<Utc>, ApiError> {
    let mut fields = Fields::new(json!({ "run_at": text }), "");
    let run_at = fields.time("run_at", true);
    bad_request(fields.finish())?;
    Ok(run_at.expect("a time was read when there is no problem"))
}
