//! Statements on `change_history`: the history of changes (the audit log). A writer calls
//! [`record`] in the transaction of the write it describes, so the row commits or rolls back
//! with it; [`list`] reads it newest first with the core's [`HistoryFilter`]; [`delete_before`]
//! is its retention.

use chrono::{DateTime, Utc};
use kairos_core::{
    Actor, Change, ChangeKind, FieldChange, FieldValue, HistoryEntry, HistoryFilter, Subject,
};
use serde_json::{json, Value};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgExecutor, QueryBuilder, Row};

use crate::Result;

const COLUMNS: &str = "id, at, actor, request_id, kind, schedule_id, calendar, workflow_id, \
    version, run_key, note, changes";

/// Records `change`, made at `at` (the write's database now), in the caller's transaction.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn record(conn: &mut PgConnection, change: &Change, at: DateTime<Utc>) -> Result<()> {
    record_many(conn, std::slice::from_ref(change), at).await
}

/// Records several changes of one write (a deploy's schedules) in one statement, however
/// many: one array per column, so the number of parameters does not grow with the changes.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn record_many(
    conn: &mut PgConnection,
    changes: &[Change],
    at: DateTime<Utc>,
) -> Result<()> {
    if changes.is_empty() {
        return Ok(());
    }
    let column = |pick: fn(&Change) -> Option<String>| changes.iter().map(pick).collect::<Vec<_>>();
    let actors: Vec<String> = changes.iter().map(|c| c.actor.name.clone()).collect();
    let kinds: Vec<&str> = changes.iter().map(|c| c.kind.as_str()).collect();
    let versions: Vec<Option<i32>> = changes.iter().map(|c| c.subject.version).collect();
    let fields: Vec<Value> = changes.iter().map(|c| fields_json(&c.fields)).collect();
    sqlx::query(
        "insert into change_history (at, actor, request_id, kind, schedule_id, calendar, \
           workflow_id, version, run_key, note, changes) \
         select $1, * from unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
           $7::text[], $8::int4[], $9::text[], $10::text[], $11::jsonb[])",
    )
    .bind(at)
    .bind(actors)
    .bind(column(|c| c.actor.request_id.clone()))
    .bind(kinds)
    .bind(column(|c| c.subject.schedule_id.clone()))
    .bind(column(|c| c.subject.calendar.clone()))
    .bind(column(|c| c.subject.workflow_id.clone()))
    .bind(versions)
    .bind(column(|c| c.subject.run_key.clone()))
    .bind(column(|c| c.note.clone()))
    .bind(fields)
    .execute(conn)
    .await?;
    Ok(())
}

/// The changes `filter` selects, newest first, at most `filter.limit`.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails or a row holds a kind this build does
/// not know.
pub async fn list(db: impl PgExecutor<'_>, filter: &HistoryFilter) -> Result<Vec<HistoryEntry>> {
    let mut query = QueryBuilder::new(format!("select {COLUMNS} from change_history where true"));
    for (column, value) in [
        ("schedule_id", &filter.schedule_id),
        ("calendar", &filter.calendar),
        ("workflow_id", &filter.workflow_id),
        ("run_key", &filter.run_key),
        ("actor", &filter.actor),
    ] {
        if let Some(value) = value {
            query
                .push(format!(" and {column} = "))
                .push_bind(value.clone());
        }
    }
    if let Some(kind) = filter.kind {
        query.push(" and kind = ").push_bind(kind.as_str());
    }
    if let Some(since) = filter.since {
        query.push(" and at >= ").push_bind(since);
    }
    if let Some(until) = filter.until {
        query.push(" and at < ").push_bind(until);
    }
    if let Some(before) = filter.before_id {
        query.push(" and id < ").push_bind(before);
    }
    query
        .push(" order by id desc limit ")
        .push_bind(filter.limit);
    let rows = query.build().fetch_all(db).await?;
    rows.iter()
        .map(entry)
        .collect::<sqlx::Result<_>>()
        .map_err(Into::into)
}

/// Deletes at most `limit` changes recorded before `older_than`, oldest first, in one
/// statement. Returns how many it deleted.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn delete_before(
    db: impl PgExecutor<'_>,
    older_than: DateTime<Utc>,
    limit: u32,
) -> Result<u64> {
    let deleted = sqlx::query(
        "delete from change_history where id in ( \
           select id from change_history where at < $1 order by at limit $2 \
           for update skip locked)",
    )
    .bind(older_than)
    .bind(i64::from(limit))
    .execute(db)
    .await?;
    Ok(deleted.rows_affected())
}

fn entry(row: &PgRow) -> sqlx::Result<HistoryEntry> {
    let kind: String = row.try_get("kind")?;
    let kind: ChangeKind = kind.parse().map_err(|err| sqlx::Error::ColumnDecode {
        index: "kind".to_string(),
        source: Box::new(err),
    })?;
    let changes: Value = row.try_get("changes")?;
    Ok(HistoryEntry {
        id: row.try_get("id")?,
        at: row.try_get("at")?,
        change: Change {
            subject: Subject {
                schedule_id: row.try_get("schedule_id")?,
                calendar: row.try_get("calendar")?,
                workflow_id: row.try_get("workflow_id")?,
                version: row.try_get("version")?,
                run_key: row.try_get("run_key")?,
            },
            kind,
            actor: Actor {
                name: row.try_get("actor")?,
                request_id: row.try_get("request_id")?,
            },
            note: row.try_get("note")?,
            fields: fields_of(&changes),
        },
    })
}

/// `[{field, old, new}, ...]`, in the change's order.
fn fields_json(fields: &[FieldChange]) -> Value {
    fields
        .iter()
        .map(|f| json!({ "field": f.field, "old": value_json(&f.old), "new": value_json(&f.new) }))
        .collect()
}

fn value_json(value: &FieldValue) -> Value {
    match value {
        FieldValue::Null => Value::Null,
        FieldValue::Bool(flag) => json!(flag),
        FieldValue::Int(n) => json!(n),
        FieldValue::Float(x) => json!(x),
        FieldValue::Text(text) => json!(text),
        FieldValue::List(items) => items.iter().map(value_json).collect(),
    }
}

fn fields_of(changes: &Value) -> Vec<FieldChange> {
    let Some(items) = changes.as_array() else {
        return Vec::new();
    };
    items
        .iter()
        .map(|item| FieldChange {
            field: item["field"].as_str().unwrap_or_default().to_string(),
            old: value_of(&item["old"]),
            new: value_of(&item["new"]),
        })
        .collect()
}

fn value_of(value: &Value) -> FieldValue {
    match value {
        Value::Null | Value::Object(_) => FieldValue::Null,
        Value::Bool(flag) => FieldValue::Bool(*flag),
        Value::Number(n) => n.as_i64().map_or_else(
            || FieldValue::Float(n.as_f64().unwrap_or(0.0)),
            FieldValue::Int,
        ),
        Value::String(text) => FieldValue::Text(text.clone()),
        Value::Array(items) => FieldValue::List(items.iter().map(value_of).collect()),
    }
}
