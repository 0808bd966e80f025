//! The History section of the schedule page: the schedule's history of changes, newest
//! first (time, actor and request, kind, the fields old → new, and the note).

use chrono::{DateTime, Utc};
use kairos_core::{FieldValue, HistoryEntry};
use maud::{html, Markup};

use crate::links::run_href;
use crate::text::words;
use crate::time::{relative, rfc3339, utc};

/// A table of changes; "No changes recorded." when there are none.
pub(crate) fn history_table(entries: &[HistoryEntry], now: DateTime<Utc>) -> Markup {
    html! {
        @if entries.is_empty() {
            p.muted #history-empty { "No changes recorded." }
        } @else {
            div.table-wrap { table.history #history-table {
                thead { tr {
                    th scope="col" { "Time" } th scope="col" { "Actor" } th scope="col" { "Change" }
                    th scope="col" { "Fields (old → new)" } th scope="col" { "Note" }
                } }
                tbody {
                    @for entry in entries { (row(entry, now)) }
                }
            } }
        }
    }
}

fn row(entry: &HistoryEntry, now: DateTime<Utc>) -> Markup {
    let change = &entry.change;
    html! {
        tr data-change-id=(entry.id) {
            td { time datetime=(rfc3339(entry.at)) title=(relative(entry.at, now)) { (utc(entry.at)) } }
            td.actor {
                (change.actor.name)
                @if let Some(request_id) = &change.actor.request_id {
                    br; small.muted title="request id" { (request_id) }
                }
            }
            td { span class=(format!("kind kind-{}", change.kind.as_str())) { (change.kind.as_str()) }
                @if let Some(key) = &change.subject.run_key {
                    " " a.run-link href=(run_href(key)) { "run" }
                }
            }
            td.changes { ul.fields {
                @for field in &change.fields {
                    li { code { (field.field) } ": " span.old { (words(&text(&field.old))) }
                         " → " span.new { (words(&text(&field.new))) } }
                }
            } }
            td.note { (words(change.note.as_deref().unwrap_or(""))) }
        }
    }
}

/// A field's value in words: `—` for none, lists comma-separated.
pub(crate) fn text(value: &FieldValue) -> String {
    match value {
        FieldValue::Null => "—".to_string(),
        FieldValue::Bool(flag) => flag.to_string(),
        FieldValue::Int(n) => n.to_string(),
        FieldValue::Float(x) => x.to_string(),
        FieldValue::Text(text) => text.clone(),
        FieldValue::List(items) if items.is_empty() => "[]".to_string(),
        FieldValue::List(items) => items.iter().map(text).collect::<Vec<_>>().join(", "),
    }
}
