//! The cursors of run listings (`GET /schedules/{id}/runs`, `GET /dead-letters`,
//! `GET /runs?late=true`): the last run of a page as `<microseconds since the epoch>.<key>`,
//! where the instant is what the listing orders by (`run_at`, `dead_lettered_at`, or
//! `late_at`). Opaque to callers: they pass a
//! `next_cursor` back as it came.

use chrono::{DateTime, Utc};

use crate::{Error, Result};

/// A page of runs, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPage {
    /// The runs of this page.
    pub runs: Vec<kairos_core::Run>,
    /// Pass as `cursor` for the next page; `None` on the last page.
    pub next_cursor: Option<String>,
}

impl RunPage {
    /// A page from `runs`, read with one more than `limit`: a full page has a next one, whose
    /// cursor is the last run kept (ordered by `at`).
    pub(crate) fn of(
        mut runs: Vec<kairos_core::Run>,
        limit: i64,
        at: impl Fn(&kairos_core::Run) -> Option<DateTime<Utc>>,
    ) -> RunPage {
        let full = runs.len() as i64 > limit;
        runs.truncate(usize::try_from(limit).unwrap_or(0));
        let next_cursor = full
            .then(|| {
                runs.last()
                    .map(|run| format_cursor(at(run), &run.idempotency_key))
            })
            .flatten();
        RunPage { runs, next_cursor }
    }
}

fn format_cursor(at: Option<DateTime<Utc>>, key: &str) -> String {
    format!("{}.{key}", at.map_or(0, |at| at.timestamp_micros()))
}

/// The instant and key a cursor names.
///
/// # Errors
/// [`Error::Invalid`] naming `cursor` for anything a listing did not give.
pub(crate) fn parse(cursor: &str) -> Result<(DateTime<Utc>, String)> {
    let parsed = cursor.split_once('.').and_then(|(micros, key)| {
        kairos_core::validate_id("cursor", key).ok()?;
        let at = DateTime::from_timestamp_micros(micros.parse().ok()?)?;
        Some((at, key.to_string()))
    });
    parsed.ok_or_else(|| {
        Error::invalid(
            "cursor",
            "is not a cursor this listing gave (pass next_cursor as it came)",
        )
    })
}
