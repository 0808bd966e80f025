//! Handlers of the history of changes: `GET /schedules/{id}/history` and `GET /history`
//! (filters `schedule_id`, `calendar`, `workflow_id`, `actor`, `kind`, `since`, `until`),
//! newest first, a page at a time with `cursor`, and the body of one change.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::Json;
use kairos_core::{FieldValue, HistoryEntry};
use kairos_registrar::{rfc3339, HistoryPage, HistoryQuery, LIST_LIMIT_MAX};
use serde::Serialize;
use serde_json::{json, Value};

use crate::body;
use crate::error::ApiError;
use crate::AppState;

/// Default page size of both listings.
const DEFAULT_LIMIT: i64 = 100;

/// One recorded change as the API shows it.
#[derive(Debug, Serialize)]
pub(crate) struct ChangeBody {
    pub id: i64,
    pub at: String,
    pub actor: String,
    pub request_id: Option<String>,
    pub kind: &'static str,
    pub schedule_id: Option<String>,
    pub calendar: Option<String>,
    pub workflow_id: Option<String>,
    pub version: Option<i32>,
    pub run_key: Option<String>,
    pub note: Option<String>,
    /// `[{field, old, new}]`.
    pub changes: Vec<Value>,
}

impl ChangeBody {
    pub(crate) fn of(entry: HistoryEntry) -> ChangeBody {
        let change = entry.change;
        let subject = change.subject;
        ChangeBody {
            id: entry.id,
            at: rfc3339(entry.at),
            actor: change.actor.name,
            request_id: change.actor.request_id,
            kind: change.kind.as_str(),
            schedule_id: subject.schedule_id,
            calendar: subject.calendar,
            workflow_id: subject.workflow_id,
            version: subject.version,
            run_key: subject.run_key,
            note: change.note,
            changes: change
                .fields
                .into_iter()
                .map(|f| json!({ "field": f.field, "old": value(&f.old), "new": value(&f.new) }))
                .collect(),
        }
    }
}

/// A field's value as JSON.
pub(crate) fn value(field: &FieldValue) -> Value {
    match field {
        FieldValue::Null => Value::Null,
        FieldValue::Bool(flag) => json!(flag),
        FieldValue::Int(n) => json!(n),
        FieldValue::Float(x) => json!(x),
        FieldValue::Text(text) => json!(text),
        FieldValue::List(items) => items.iter().map(value).collect(),
    }
}

/// A page of the history of changes, newest first.
#[derive(Debug, serde::Serialize)]
pub(crate) struct HistoryPageBody {
    history: Vec<ChangeBody>,
    next_cursor: Option<String>,
}

fn page_json(page: HistoryPage) -> Json<HistoryPageBody> {
    Json(HistoryPageBody {
        history: page.entries.into_iter().map(ChangeBody::of).collect(),
        next_cursor: page.next_cursor,
    })
}

/// `GET /schedules/{id}/history?limit=&cursor=`: the schedule's changes (and its runs'),
/// newest first; also after it was deleted.
pub(crate) async fn schedule(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<HistoryPageBody>, ApiError> {
    let mut query = body::Query::new(params);
    let limit = query.integer("limit", DEFAULT_LIMIT.min(LIST_LIMIT_MAX));
    let cursor = query.text("cursor");
    query.finish()?;
    let page = state
        .registrar
        .schedule_history(&id, cursor.as_deref(), limit);
    Ok(page_json(page.await?))
}

/// `GET /history?schedule_id=&calendar=&workflow_id=&actor=&kind=&since=&until=&limit=&cursor=`.
pub(crate) async fn list(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<HistoryPageBody>, ApiError> {
    let mut query = body::Query::new(params);
    let wanted = HistoryQuery {
        schedule_id: query.text("schedule_id"),
        calendar: query.text("calendar"),
        workflow_id: query.text("workflow_id"),
        actor: query.text("actor"),
        kind: query.text("kind"),
        since: query.time("since"),
        until: query.time("until"),
        cursor: query.text("cursor"),
        limit: query.integer("limit", DEFAULT_LIMIT.min(LIST_LIMIT_MAX)),
    };
    query.finish()?;
    Ok(page_json(state.registrar.history(&wanted).await?))
}
