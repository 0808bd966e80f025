//! The operator's routes under `/runs`: `GET /runs/{key}` (the run, the history of its
//! attempts and their logs), `GET /runs` (runs not `SUCCESS` by their deadline: `?late=true`),
//! `POST /runs/{key}/retry` (one more attempt of a finished run) and `POST /runs/{key}/cancel`;
//! the executor's status reports under `/runs` are in `runs/status.rs`.

pub(crate) mod status;

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::Json;
use kairos_registrar::{Error as RegistrarError, Phase, Problem, RunQuery};
use kairos_store::cancel::Cancel;
use kairos_worker::intake::{self};
use serde_json::Value;

use crate::access::Caller;
use crate::body::{self, Fields};
use crate::error::{bad_request, intake_failed, ApiError};
use crate::wire::{CancelledBody, RunBody, RunPageBody, RunViewBody};
use crate::AppState;

/// `GET /runs/{key}` → the run with `max_attempts`, `history` and `logs`.
pub(crate) async fn get(
    State(state): State<AppState>,
    Path(key): Path<String>,
) -> Result<Json<RunViewBody>, ApiError> {
    Ok(Json(RunViewBody::of(state.registrar.run(&key).await?)))
}

/// `GET /runs?status=&phase=&schedule_id=&workflow_id=&source=&from=&to=&cursor=&limit=` →
/// `{runs, next_cursor}`: runs across schedules, newest tick first (`phase`: `in_flight`,
/// `failed`, `dead_letter`, `late`; the last two newest mark first). `late=true` is
/// `phase=late`.
pub(crate) async fn list(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<RunPageBody>, ApiError> {
    let mut query = body::Query::new(params);
    let late = query.boolean("late");
    let phase = query.text("phase");
    let mut filter = RunQuery {
        status: query.text("status"),
        schedule_id: query.text("schedule_id"),
        workflow_id: query.text("workflow_id"),
        source: query.text("source"),
        from: query.time("from"),
        to: query.time("to"),
        cursor: query.text("cursor"),
        limit: query.integer("limit", 100),
        ..RunQuery::default()
    };
    query.finish()?;
    filter.phase = match (late, phase.as_deref()) {
        (Some(true), None | Some("late")) => Some(Phase::Late),
        (Some(true), Some(_)) => {
            return Err(ApiError::BadRequest(vec![Problem::new(
                "late",
                "late=true is phase=late: give one of them",
            )]))
        }
        (Some(false), _) => {
            return Err(ApiError::BadRequest(vec![Problem::new(
                "late",
                "only true is known (phase=late); leave it out to list every run",
            )]))
        }
        (None, Some(phase)) => Some(Phase::parse(phase)?),
        (None, None) => None,
    };
    Ok(Json(RunPageBody::of(
        state.registrar.list_runs(&filter).await?,
    )))
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
) -> Result<Json<CancelledBody>, ApiError> {
    let body = match body {
        Ok(bytes) if bytes.is_empty() => Ok(Bytes::from_static(b"{}")),
        other => other,
    };
    let reason = read_cancel(body::json(body, state.max_body_bytes)?)?;
    let done = state
        .intake
        .cancel_by(&key, reason.as_deref(), &actor)
        .await
        .map_err(intake_failed)?;
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
    Ok(Json(CancelledBody {
        run: RunBody::of(run),
        cancel: done.kind(),
        message,
    }))
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
