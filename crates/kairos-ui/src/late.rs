//! A run's deadline as the pages say it: by when it must be final, and, once the sweep
//! marked it late, by how much it missed (ended after its deadline, still unfinished past
//! it, or ended without `SUCCESS`). Late is a mark beside the status, never a status.

use chrono::{DateTime, Utc};
use kairos_registrar::Run;
use maud::{html, Markup};

use crate::time::{rfc3339, span, utc};

/// How much run `run` missed its deadline by, in words, as of `now`; `None` when it is
/// not late.
pub(crate) fn by_how_much(run: &Run, now: DateTime<Utc>) -> Option<String> {
    run.late_at?;
    let deadline = run.deadline_at?;
    Some(match run.finished_at {
        Some(finished) if finished > deadline => format!(
            "ended {} {} after its deadline",
            run.status.as_str(),
            span(finished - deadline)
        ),
        Some(_) => format!(
            "ended {} before its deadline, not SUCCESS",
            run.status.as_str()
        ),
        None if run.status.terminal() => {
            format!("{}: never ran by its deadline", run.status.as_str())
        }
        None => format!(
            "overdue by {}, still {}",
            span(now - deadline),
            run.status.as_str()
        ),
    })
}

/// The mark of a late run in a run table's status cell (nothing for one on time).
pub(crate) fn mark(run: &Run, now: DateTime<Utc>) -> Markup {
    html! {
        @if let (Some(at), Some(how)) = (run.late_at, by_how_much(run, now)) {
            br; small.late title=(run.late_reason.clone().unwrap_or_default()) {
                "late (" (how) "), marked " time datetime=(rfc3339(at)) { (utc(at)) }
            }
        }
    }
}

/// The run page's deadline fields: the deadline and, when late, when it was marked, by how
/// much and why.
pub(crate) fn fields(run: &Run, now: DateTime<Utc>) -> Markup {
    html! {
        dt { "Deadline" }
        dd #run-deadline {
            @match run.deadline_at {
                Some(at) => { time datetime=(rfc3339(at)) { (utc(at)) } }
                None => { "— (its schedule sets no deadline_s)" }
            }
        }
        dt { "Late" }
        dd #run-late {
            @match (run.late_at, by_how_much(run, now)) {
                (Some(at), Some(how)) => {
                    span.badge.late { "late" } " " (how) "; marked "
                    time datetime=(rfc3339(at)) { (utc(at)) }
                    @if let Some(reason) = &run.late_reason { br; span.detail #run-late-reason { (reason) } }
                }
                _ => { "no" }
            }
        }
    }
}
