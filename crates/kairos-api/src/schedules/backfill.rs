//! `POST /schedules/{id}/backfill` (docs/design.md §4, §5): the schedule's ticks in a range,
//! with an optional `overlap_policy` for the runs it creates (default `queue`).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::Json;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::access::Caller;
use crate::body::{self, Fields};
use crate::error::{bad_request, ApiError};
use crate::wire::BackfillBody;
use crate::AppState;

/// `POST /schedules/{id}/backfill` `{from, to}` → `{ticks, created, already_present}`.
pub(crate) async fn backfill(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<BackfillBody>, ApiError> {
    let (from, to, overlap) = read_backfill(body::json(body, state.max_body_bytes)?)?;
    let done = state
        .registrar
        .acting_as(actor)
        .backfill(&id, from, to, overlap.as_deref())
        .await?;
    Ok(Json(BackfillBody {
        ticks: done.ticks,
        created: done.created,
        already_present: done.already_present,
    }))
}

/// A backfill body: `(from, to, overlap_policy)`.
type Backfill = (DateTime<Utc>, DateTime<Utc>, Option<String>);

/// Reads a backfill body.
pub(crate) fn read_backfill(body: Value) -> Result<Backfill, ApiError> {
    let mut fields = Fields::new(body, "");
    let from = fields.time("from", true);
    let to = fields.time("to", true);
    let overlap = fields.string("overlap_policy", false);
    bad_request(fields.finish())?;
    let (Some(from), Some(to)) = (from, to) else {
        unreachable!("required fields are present when there is no problem");
    };
    Ok((from, to, overlap))
}
