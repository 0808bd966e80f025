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

#[cfg(test)]
mod tests {
    use super::skip_reason;

    #[test]
    fn the_reason_names_who_and_why() {
        assert_eq!(
            skip_reason("ops", Some("holiday")),
            "skipped by ops: holiday"
        );
        assert_eq!(skip_reason("ops", None), "skipped by ops");
    }
}
