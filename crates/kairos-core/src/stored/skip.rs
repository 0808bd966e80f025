//! One occurrence of a schedule that an operator asked not to run.

use chrono::{DateTime, Utc};

/// A skipped tick: the planner writes its run as `SKIPPED` (or a write marks the planned
/// run so) with [`Skip::reason`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    /// The schedule it belongs to.
    pub schedule_id: String,
    /// The tick skipped (a fire time of the schedule, whole seconds).
    pub run_at: DateTime<Utc>,
    /// Why, as the caller wrote it.
    pub note: Option<String>,
    /// Who asked: a token's name, a JWT subject, or `anonymous`.
    pub skipped_by: String,
    /// When it was asked.
    pub created_at: DateTime<Utc>,
}

impl Skip {
    /// The reason written on the tick's run: `skipped by <who>: <note>` (`skipped by <who>`
    /// without a note). The store's planner insert writes the same text in SQL.
    pub fn reason(&self) -> String {
        skip_reason(&self.skipped_by, self.note.as_deref())
    }
}

/// The reason a skip writes on its run, from who asked and the note.
pub fn skip_reason(skipped_by: &str, note: Option<&str>) -> String {
    match note {
        Some(note) => format!("skipped by {skipped_by}: {note}"),
        None => format!("skipped by {skipped_by}"),
    }
}

/// The reason the run of a tick skipped because its schedule was paused records, from who
/// paused it and the note (either may be unknown).
pub fn paused_reason(paused_by: Option<&str>, note: Option<&str>) -> String {
    let mut reason = String::from("paused");
    if let Some(by) = paused_by {
        reason.push_str(" by ");
        reason.push_str(by);
    }
    if let Some(note) = note {
        reason.push_str(": ");
        reason.push_str(note);
    }
    reason
}

#[cfg(test)]
mod tests {
    use super::{paused_reason, skip_reason};

    #[test]
    fn a_pause_reason_names_who_and_why_when_known() {
        assert_eq!(
            paused_reason(Some("ops"), Some("vendor freeze")),
            "paused by ops: vendor freeze"
        );
        assert_eq!(paused_reason(Some("ops"), None), "paused by ops");
        assert_eq!(paused_reason(None, Some("freeze")), "paused: freeze");
    }

    #[test]
    fn the_reason_names_who_and_why() {
        assert_eq!(
            skip_reason("ops", Some("holiday")),
            "skipped by ops: holiday"
        );
        assert_eq!(skip_reason("ops", None), "skipped by ops");
    }
}
