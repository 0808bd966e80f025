//! What people and kairos did to one run, from its history of changes, as moments of the
//! run page's timeline: who retried or cancelled it, and the dead letter a retry took back
//! (the run row forgets it; the retry's change keeps it).

use chrono::{DateTime, Utc};
use kairos_core::{ChangeKind, FieldValue, HistoryEntry};

use crate::history::text;

/// One moment of the timeline.
pub(crate) struct Moment {
    pub(crate) at: DateTime<Utc>,
    pub(crate) what: String,
    pub(crate) detail: Option<String>,
}

/// The moments `changes` (the changes of run `key`, any order) add to its timeline. A field
/// that only names the run itself (a trigger's `run`) is left out: the page is about it.
pub(crate) fn moments(changes: &[HistoryEntry], key: &str) -> Vec<Moment> {
    let names_the_run = |value: &FieldValue| matches!(value, FieldValue::Text(text) if text == key);
    let mut moments = Vec::new();
    for entry in changes {
        let change = &entry.change;
        let field = |name: &str| change.fields.iter().find(|f| f.field == name);
        if let Some(dead) = field("dead_lettered_at") {
            if let FieldValue::Text(at) = &dead.old {
                if let Ok(at) = DateTime::parse_from_rfc3339(at) {
                    let attempt = field("attempt").map(|f| text(&f.old));
                    moments.push(Moment {
                        at: at.with_timezone(&Utc),
                        what: "Dead-lettered".into(),
                        detail: attempt.map(|n| format!("attempt {n} was the last")),
                    });
                }
            }
        }
        let done = match change.kind {
            ChangeKind::Retry => "Retried",
            ChangeKind::Cancel => "Cancel requested",
            ChangeKind::Trigger => "Triggered",
            other => other.as_str(),
        };
        let mut detail: Vec<String> = change
            .fields
            .iter()
            .filter(|f| f.field != "dead_lettered_at")
            .filter(|f| !names_the_run(&f.new) && !names_the_run(&f.old))
            .map(|f| format!("{} {} → {}", f.field, text(&f.old), text(&f.new)))
            .collect();
        detail.extend(change.note.clone());
        detail.extend(
            change
                .actor
                .request_id
                .as_ref()
                .map(|id| format!("request {id}")),
        );
        moments.push(Moment {
            at: entry.at,
            what: format!("{done} by {}", change.actor.name),
            detail: (!detail.is_empty()).then(|| detail.join("; ")),
        });
    }
    moments
}
