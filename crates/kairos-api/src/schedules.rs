//! Handlers of the `/schedules` routes.

pub(crate) mod backfill;
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
use kairos_core::{DstNote, Occurrence, TickExplained, TickNote};
use kairos_registrar::{
    ListFilter, PauseChange, PreviewInput, ScheduleInput, Skip, LIST_LIMIT_MAX,
};

use serde_json::{json, Value};

use crate::access::Caller;
use crate::body::{self, Fields};
use crate::error::{bad_request, ApiError};
use crate::wire::{
    dry_run_body, rules_input, schedule_input, RunPageBody, ScheduleBody, SchedulePageBody,
    SkipBody, UpsertedBody,
};
use crate::AppState;

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
) -> Result<Json<Value>, ApiError> {
    let mut query = body::Query::new(params);
    let explain = query.boolean("explain").unwrap_or(false);
    query.finish()?;
    let view = state.registrar.get(&id).await?;
    let deadline_s = view.schedule.deadline_s;
    let pause = Pause::of(&view.schedule);
    let mut body =
        ScheduleBody::of(view.schedule, view.next_fire, Some(view.preview)).with_stats(&view.stats);
    body.waiting_on = view.waiting_on;
    // A plain struct of strings, numbers and options: serializing it cannot fail.
    let mut answer = json!(body);
    if explain {
        let explained: Vec<Value> = view
            .explained
            .into_iter()
            .map(|tick| {
                let at = tick.note.at;
                with_deadline(skipped_tick_json(tick, &view.skips), at, deadline_s)
            })
            .collect();
        answer["explained_preview"] = json!(explained);
        if let Some(pause) = pause {
            answer["explained_pause"] = pause.json();
        }
    }
    Ok(Json(answer))
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
) -> Result<Json<serde_json::Value>, ApiError> {
    let (input, explain) = read_preview(body::json(body, state.max_body_bytes)?)?;
    let preview = state.registrar.preview_explained(&input).await?;
    let rfc3339 = kairos_registrar::rfc3339;
    let times: Vec<String> = preview.fire_times.into_iter().map(rfc3339).collect();
    let excluded: Vec<Value> = preview
        .excluded
        .into_iter()
        .map(|e| json!({ "at": rfc3339(e.at), "by": e.by.to_string() }))
        .collect();
    let explained: Vec<Value> = preview.notes.into_iter().map(note_json).collect();
    let mut answer = json!({ "fire_times": times, "excluded": excluded, "explained": explained });
    if input.schedule_id.is_some() {
        let skipped: Vec<SkipBody> = preview.skips.iter().cloned().map(SkipBody::of).collect();
        answer["skipped"] = json!(skipped);
    }
    if explain {
        let deadline_s = input.deadline_s.and_then(|s| i32::try_from(s).ok());
        let skips = &preview.skips;
        let ticks: Vec<Value> = preview
            .ticks
            .into_iter()
            .map(|tick| {
                let at = tick.note.at;
                with_deadline(skipped_tick_json(tick, skips), at, deadline_s)
            })
            .collect();
        let outside: Vec<Value> = preview
            .outside_window
            .into_iter()
            .map(|o| json!({ "at": rfc3339(o.at), "why": o.side.as_str() }))
            .collect();
        answer["ticks"] = json!(ticks);
        answer["outside_window"] = json!(outside);
    }
    Ok(Json(answer))
}

/// One upcoming time explained: `{at, wall_time, utc_offset, fire_at, jitter_ms,
/// rolled_from?, dst?}` (`dst` as in `explained`).
fn tick_json(tick: TickExplained) -> Value {
    let mut body = note_json(tick.note.clone());
    body["wall_time"] = json!(tick.wall.format("%Y-%m-%dT%H:%M:%S").to_string());
    body["utc_offset"] = json!(tick.utc_offset());
    body["fire_at"] = json!(kairos_registrar::rfc3339(tick.fire_at));
    body["jitter_ms"] = json!(tick.jitter.num_milliseconds());
    body
}

/// An explained tick with the deadline its run will have (`deadline_at`: the tick plus
/// the schedule's `deadline_s`), when the schedule sets one.
fn with_deadline(
    mut tick: Value,
    at: chrono::DateTime<chrono::Utc>,
    deadline_s: Option<i32>,
) -> Value {
    if let Some(seconds) = deadline_s {
        let deadline = at + chrono::Duration::seconds(i64::from(seconds));
        tick["deadline_at"] = json!(kairos_registrar::rfc3339(deadline));
    }
    tick
}

/// A paused schedule's pause, as its explained preview shows it.
struct Pause {
    by: Option<String>,
    note: Option<String>,
    until: Option<chrono::DateTime<chrono::Utc>>,
    catchup: &'static str,
}

impl Pause {
    fn of(schedule: &kairos_registrar::Schedule) -> Option<Pause> {
        schedule.paused.then(|| Pause {
            by: schedule.paused_by.clone(),
            note: schedule.pause_note.clone(),
            until: schedule.paused_until,
            catchup: schedule.catchup_policy.as_str(),
        })
    }

    /// `{paused_by, note, until, reason}`: what the pause does to the fire times shown.
    fn json(&self) -> Value {
        let by = self.by.as_deref().unwrap_or("anonymous");
        let why = self
            .note
            .as_deref()
            .map(|n| format!(": {n}"))
            .unwrap_or_default();
        let reason = match self.until {
            Some(until) => format!(
                "paused until {} by {by}{why}; the fire times start there, the ticks before \
                 it are missed, and on resume catch-up {} decides which of them run",
                kairos_registrar::rfc3339(until),
                self.catchup
            ),
            None => format!(
                "paused by {by}{why}, until resumed: none of these fire times fires unless \
                 the schedule is resumed before it, and on resume catch-up {} decides which \
                 missed ticks run",
                self.catchup
            ),
        };
        json!({
            "paused_by": self.by,
            "note": self.note,
            "until": self.until.map(kairos_registrar::rfc3339),
            "reason": reason,
        })
    }
}

/// [`tick_json`] with `skipped` (`{skipped_by, note, reason}`) when the tick is one of
/// `skips`: it will not run.
fn skipped_tick_json(tick: TickExplained, skips: &[Skip]) -> Value {
    let at = tick.note.at;
    let mut body = tick_json(tick);
    if let Some(skip) = skips.iter().find(|skip| skip.run_at == at) {
        body["skipped"] = json!({
            "skipped_by": skip.skipped_by,
            "note": skip.note,
            "reason": skip.reason(),
        });
    }
    body
}

/// One fire time's note: `{at, rolled_from?, dst?: {rule, source, ...}}`.
fn note_json(note: TickNote) -> Value {
    let mut body = json!({ "at": kairos_registrar::rfc3339(note.at) });
    if let Some(from) = note.rolled_from {
        body["rolled_from"] = json!(kairos_registrar::rfc3339(from));
    }
    match note.dst {
        Some(DstNote::Shifted { wall, source }) => {
            body["dst"] = json!({
                "rule": "dst_gap=shift",
                "source": source.as_str(),
                "wall_time": wall.format("%Y-%m-%dT%H:%M:%S").to_string(),
                "note": "the wall time did not exist; fired when the clocks jumped",
            });
        }
        Some(DstNote::Fold {
            occurrence,
            fold,
            source,
        }) => {
            let which = match occurrence {
                Occurrence::First => "first",
                Occurrence::Second => "second",
            };
            body["dst"] = json!({
                "rule": format!("dst_fold={fold}"),
                "source": source.as_str(),
                "occurrence": which,
                "note": "the wall time happened twice",
            });
        }
        None => {}
    }
    body
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
