//! `POST /schedules/{id}/trigger` (docs/design.md §4, §5): one run now, keyed on the caller's
//! request id, with an optional `overlap_policy` for it.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::Json;
use serde_json::Value;

use crate::access::Caller;
use crate::body::{self, Fields};
use crate::error::{bad_request, ApiError};
use crate::wire::RunBody;
use crate::AppState;

/// `POST /schedules/{id}/trigger` `{request_id}` → 201 with the run created, or 200 with
/// the run this request id created before.
pub(crate) async fn trigger(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (request_id, overlap) = read_trigger(body::json(body, state.max_body_bytes)?)?;
    let triggered = state
        .registrar
        .acting_as(actor)
        .trigger(&id, &request_id, overlap.as_deref())
        .await?;
    let location = format!("/runs/{}", triggered.run.idempotency_key);
    let body = Json(RunBody::of(triggered.run));
    Ok(crate::wire::written(triggered.created, location, body))
}

/// Reads a trigger body: `(request_id, overlap_policy)`.
pub(crate) fn read_trigger(body: Value) -> Result<(String, Option<String>), ApiError> {
    let mut fields = Fields::new(body, "");
    let request_id = fields.string("request_id", true);
    let overlap = fields.string("overlap_policy", false);
    bad_request(fields.finish())?;
    let request_id = request_id.expect("required fields are present when there is no problem");
    Ok((request_id, overlap))
}
