//! Handlers of the `/schedules` routes.

pub(crate) mod backfill;
mod explained;
pub(crate) mod skips;
pub(crate) mod trigger;

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use kairos_registrar::{ListFilter, PauseChange, PreviewInput, ScheduleInput, LIST_LIMIT_MAX};

use serde_json::Value;

use crate::access::Caller;
use crate::body::{self, Fields};
use crate::error::{bad_request, ApiError};
use crate::wire::{
    dry_run_body, rules_input, schedule_input, RunPageBody, ScheduleBody, SchedulePageBody,
    SkipBody, UpsertedBody,
};
use crate::AppState;
use explained::{ExplainedPause, LeftOutBody, NoteBody, TickBody};

/// `POST /schedules/upsert[?dry_run=true]`: 201 when created, 200 when updated (or
/// unchanged); a dry-run answers 200 with what it would do and stores nothing.
pub(crate) async fn upsert(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Query(params): Query<HashMap<String, String>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let dry_run = dry_run(params)?;
    let input = read_upsert(body::json(body, state.max_body_bytes)?)?;
    if dry_run {
        let dry = state.registrar.upsert_dry_run(&input).await?;
        return Ok((StatusCode::OK, Json(dry_run_body(dry))).into_response());
    }
    let upserted = state.registrar.acting_as(actor).upsert(&input).await?;
    let location = format!("/schedules/{}", upserted.schedule.schedule_id);
    let body = Json(UpsertedBody::of(&upserted));
    Ok(crate::wire::written(upserted.created, location, body))
}

/// `POST /schedules/pause`: `{schedule_id, paused, note?, until?}` → 204.
pub(crate) async fn pause(
    State(state): State<AppState>,
    Caller(actor): Caller,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, ApiError> {
    let pause = read_pause(body::json(body, state.max_body_bytes)?)?;
    let change = PauseChange {
        paused: pause.paused,
        note: pause.note.as_deref(),
        until: pause.until,
    };
    state
        .registrar
        .acting_as(actor.clone())
        .pause(&pause.schedule_id, change, &actor.name)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /schedules/{id}` → 204, 404 if unknown.
pub(crate) async fn delete(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.registrar.acting_as(actor).delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /schedules/{id}[?explain=true]`: the schedule, its next five fire times (each
/// explained with `explain=true`) and its statistics.
pub(crate) async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<ScheduleViewBody>, ApiError> {
    let mut query = body::Query::new(params);
    let explain = query.boolean("explain").unwrap_or(false);
    query.finish()?;
    let view = state.registrar.get(&id).await?;
    let deadline_s = view.schedule.deadline_s;
    let pause = ExplainedPause::of(&view.schedule);
    let mut schedule =
        ScheduleBody::of(view.schedule, view.next_fire, Some(view.preview)).with_stats(&view.stats);
    schedule.waiting_on = view.waiting_on;
    let skips = &view.skips;
    let explained_preview = explain.then(|| {
        view.explained
            .into_iter()
            .map(|tick| TickBody::of(tick, skips, deadline_s))
            .collect()
    });
    Ok(Json(ScheduleViewBody {
        schedule,
        explained_preview,
        explained_pause: pause.filter(|_| explain),
    }))
}

/// `GET /schedules/{id}`: the schedule, with `explain=true` its explained fire times and
/// its pause.
#[derive(Debug, serde::Serialize)]
pub(crate) struct ScheduleViewBody {
    #[serde(flatten)]
    schedule: ScheduleBody,
    #[serde(skip_serializing_if = "Option::is_none")]
    explained_preview: Option<Vec<TickBody>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    explained_pause: Option<ExplainedPause>,
}

/// `POST /schedules/preview`: the fire times, the times left out and why, with
/// `schedule_id` the stored skips, and with `explain` each tick explained.
#[derive(Debug, serde::Serialize)]
pub(crate) struct PreviewBody {
    fire_times: Vec<String>,
    excluded: Vec<LeftOutBody>,
    explained: Vec<NoteBody>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<Vec<SkipBody>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ticks: Option<Vec<TickBody>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    outside_window: Option<Vec<LeftOutBody>>,
}

/// `GET /schedules?q=&workflow_id=&user_id=&paused=&cursor=&limit=` (`q`: a
/// case-insensitive substring of the schedule, workflow or user id).
pub(crate) async fn list(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<SchedulePageBody>, ApiError> {
    let mut query = body::Query::new(params);
    let filter = ListFilter {
        workflow_id: query.text("workflow_id"),
        user_id: query.text("user_id"),
        paused: query.boolean("paused"),
        q: query.text("q"),
        after: query.text("cursor"),
        limit: query.integer("limit", 100),
        ..ListFilter::default()
    };
    query.finish()?;
    let page = state.registrar.list(&filter).await?;
    let schedules: Vec<ScheduleBody> = page
        .schedules
        .into_iter()
        .zip(page.next_fires)
        .map(|(s, next_fire)| ScheduleBody::of(s, next_fire, None))
        .collect();
    Ok(Json(SchedulePageBody {
        schedules,
        next_cursor: page.next_cursor,
    }))
}

/// `GET /schedules/{id}/runs?limit=&status=&cursor=`: newest first, a page at a time.
pub(crate) async fn runs(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<RunPageBody>, ApiError> {
    let mut query = body::Query::new(params);
    let limit = query.integer("limit", 100.min(LIST_LIMIT_MAX));
    let status = query.text("status");
    let cursor = query.text("cursor");
    query.finish()?;
    let registrar = &state.registrar;
    let page = registrar.runs(&id, status.as_deref(), cursor.as_deref(), limit);
    Ok(Json(RunPageBody::of(page.await?)))
}

/// `POST /schedules/preview`: fire times of a spec; nothing stored.
pub(crate) async fn preview(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<PreviewBody>, ApiError> {
    let (input, explain) = read_preview(body::json(body, state.max_body_bytes)?)?;
    let preview = state.registrar.preview_explained(&input).await?;
    let rfc3339 = kairos_registrar::rfc3339;
    let skips = preview.skips;
    let deadline_s = input.deadline_s.and_then(|s| i32::try_from(s).ok());
    let ticks = explain.then(|| {
        preview
            .ticks
            .into_iter()
            .map(|tick| TickBody::of(tick, &skips, deadline_s))
            .collect()
    });
    let outside_window = explain.then(|| {
        preview
            .outside_window
            .into_iter()
            .map(|o| LeftOutBody::outside(o.at, o.side.as_str()))
            .collect()
    });
    Ok(Json(PreviewBody {
        fire_times: preview.fire_times.into_iter().map(rfc3339).collect(),
        excluded: preview
            .excluded
            .into_iter()
            .map(|e| LeftOutBody::excluded(e.at, e.by.to_string()))
            .collect(),
        explained: preview.notes.into_iter().map(NoteBody::of).collect(),
        skipped: input
            .schedule_id
            .is_some()
            .then(|| skips.iter().cloned().map(SkipBody::of).collect()),
        ticks,
        outside_window,
    }))
}

/// The `dry_run` query parameter (default false); any other parameter is refused.
pub(crate) fn dry_run(params: HashMap<String, String>) -> Result<bool, ApiError> {
    let mut query = body::Query::new(params);
    let dry_run = query.boolean("dry_run").unwrap_or(false);
    query.finish()?;
    Ok(dry_run)
}

/// Reads an upsert body; every problem at once.
pub(crate) fn read_upsert(body: Value) -> Result<ScheduleInput, ApiError> {
    let mut fields = Fields::new(body, "");
    let input = schedule_input(&mut fields, None);
    bad_request(fields.finish())?;
    Ok(input)
}

/// A pause body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PauseBody {
    pub schedule_id: String,
    pub paused: bool,
    pub note: Option<String>,
    /// When the pause ends by itself.
    pub until: Option<DateTime<Utc>>,
}

/// Reads a pause body: `{schedule_id, paused, note?, until?}`.
pub(crate) fn read_pause(body: Value) -> Result<PauseBody, ApiError> {
    let mut fields = Fields::new(body, "");
    let schedule_id = fields.string("schedule_id", true);
    let paused = fields.boolean("paused", true);
    let note = fields.string("note", false);
    let until = fields.time("until", false);
    bad_request(fields.finish())?;
    let (Some(schedule_id), Some(paused)) = (schedule_id, paused) else {
        unreachable!("required fields are present when there is no problem");
    };
    Ok(PauseBody {
        schedule_id,
        paused,
        note,
        until,
    })
}

/// Reads a preview body: the input and whether to explain every tick.
pub(crate) fn read_preview(body: Value) -> Result<(PreviewInput, bool), ApiError> {
    let mut fields = Fields::new(body, "");
    let input = PreviewInput {
        cron_expr: fields.string("cron_expr", true).unwrap_or_default(),
        timezone: fields.string("timezone", true).unwrap_or_default(),
        start_at: fields.time("start_at", false),
        end_at: fields.time("end_at", false),
        count: fields.integer("count", false),
        after: fields.time("after", false),
        rules: rules_input(&mut fields),
        schedule_id: fields.string("schedule_id", false),
        jitter_ms: fields.integer("jitter_ms", false),
        deadline_s: fields.integer("deadline_s", false),
    };
    let explain = fields.boolean("explain", false).unwrap_or(false);
    bad_request(fields.finish())?;
    Ok((input, explain))
}
