//! The overlap policy at fire time, without IO: for each claimed run, in claim order,
//! launch it, skip it, queue it (asking the oldest run in flight to cancel, under
//! `cancel_other`), or leave it for the next round.
//!
//! Every policy but `allow` is exclusive: at most `max_in_flight` runs of the schedule in
//! flight (one unless the schedule says more). A run that cannot go out waits (`QUEUED`) up
//! to a bound — the schedule's `max_queued` under `queue` (unbounded without one), one under
//! `buffer_one` and `cancel_other` — and past it is `SKIPPED` with reason `queue_full` or
//! `buffer_full`; under `skip` it is `SKIPPED` at once.

use std::collections::{HashMap, HashSet};

use kairos_core::{OverlapPolicy, RunStatus};
use kairos_store::dispatch::{Blockers, Claimed};

use crate::metrics::SkipReason;

/// What to do with one claimed run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Publish it; `exclusive` under every policy but `allow`.
    Launch {
        /// Counts against the schedule's limit on runs in flight.
        exclusive: bool,
    },
    /// `SKIPPED` (overlap `skip`, or a full queue or buffer) with the reason. `behind`
    /// names the runs launched in this same batch that fill the schedule: the skip stands
    /// only if they all really go out.
    Skip {
        /// Why, as counted: overlap `skip`, or past the queue's or the buffer's bound.
        why: SkipReason,
        /// Why, as the run records it (starts with `queue_full` or `buffer_full` past a
        /// bound).
        reason: String,
        /// The runs of this batch it would overlap.
        behind: Vec<String>,
    },
    /// `QUEUED` (overlap `queue`, `buffer_one`, `cancel_other`) with the reason; `behind`
    /// as for `Skip`.
    Queue {
        /// Why.
        reason: String,
        /// The runs of this batch it waits for.
        behind: Vec<String>,
        /// Under `cancel_other`: the oldest run in flight, to cancel (in the same
        /// transaction).
        cancel: Option<String>,
    },
    /// Leave it `PENDING`: another dispatcher holds its schedule right now (or, under
    /// `cancel_other`, runs of this batch filled the schedule first: the next round cancels
    /// the oldest).
    Defer,
    /// `FAILED`: its launch deadline passed and its schedule was free, so nothing but the
    /// launch itself kept it back (a run that waited for its schedule is queued or skipped
    /// by policy instead).
    Late,
}

/// What a run of an exclusive schedule waits for when another dispatcher holds the
/// schedule and the database shows no run in flight yet (that dispatcher's publish is not
/// committed).
const ANOTHER_DISPATCHER: &str = "of another dispatcher's round";

/// Decides every run of a batch. `held` are the exclusive schedules whose dispatch lock
/// this transaction holds; `blockers` what the database says is in flight or queued.
pub(crate) fn decide(
    runs: &[Claimed],
    held: &HashSet<String>,
    blockers: &HashMap<String, Blockers>,
) -> Vec<Decision> {
    let mut launched: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut queued: HashMap<&str, i64> = HashMap::new();
    runs.iter()
        .map(|run| {
            let schedule = run.schedule_id.as_str();
            if run.status == RunStatus::Retrying {
                // Its next attempt: it already holds its slot of the schedule (the database
                // counts it in flight), so it takes no other.
                if run.exclusive && !held.contains(schedule) {
                    return Decision::Defer;
                }
                return Decision::Launch {
                    exclusive: run.exclusive,
                };
            }
            if run.overlap_policy == OverlapPolicy::Allow {
                return Decision::Launch { exclusive: false };
            }
            if !held.contains(schedule) {
                // Held by another dispatcher since it came due, past its launch deadline:
                // its schedule is busy, so the overlap policy decides. A run is never failed
                // for waiting on a lock.
                if run.late {
                    return busy(run, blockers.get(schedule), &launched, &queued);
                }
                return Decision::Defer;
            }
            let decision = exclusive(run, blockers.get(schedule), &launched, &queued);
            if run.late && matches!(decision, Decision::Launch { .. }) {
                return Decision::Late;
            }
            match decision {
                Decision::Launch { .. } => launched
                    .entry(schedule)
                    .or_default()
                    .push(run.idempotency_key.as_str()),
                Decision::Queue { .. } => *queued.entry(schedule).or_default() += 1,
                _ => {}
            }
            decision
        })
        .collect()
}

/// The decision for a run of an exclusive schedule that another dispatcher holds: as if
/// the schedule were full (of the runs that dispatcher is deciding or publishing), whatever
/// the database shows yet. A run queued this way is released when a run of the schedule in
/// flight ends, or by the sweep when the schedule has a free slot.
fn busy(
    run: &Claimed,
    known: Option<&Blockers>,
    launched: &HashMap<&str, Vec<&str>>,
    queued: &HashMap<&str, i64>,
) -> Decision {
    let mut known = known.cloned().unwrap_or_default();
    let holder_unseen = known.in_flight.is_none();
    if holder_unseen {
        known.in_flight = Some(ANOTHER_DISPATCHER.to_string());
    }
    known.in_flight_count = known.in_flight_count.max(limit(Some(&known)));
    let why = "its schedule was held by another dispatcher past the launch deadline";
    match exclusive(run, Some(&known), launched, queued) {
        Decision::Skip {
            why: SkipReason::Overlap,
            behind,
            ..
        } if holder_unseen => Decision::Skip {
            why: SkipReason::Overlap,
            reason: format!("overlap skip: {why}"),
            behind,
        },
        Decision::Queue { behind, .. } if holder_unseen => Decision::Queue {
            reason: format!("overlap {}: {why}", run.overlap_policy),
            behind,
            // No run in flight is known yet, so none to cancel (`cancel_other`): the next
            // round that holds the schedule asks.
            cancel: None,
        },
        other => other,
    }
}

/// The schedule's limit on runs in flight: `max_in_flight`, else one.
fn limit(known: Option<&Blockers>) -> i64 {
    known
        .and_then(|b| b.max_in_flight)
        .map_or(1, i64::from)
        .max(1)
}

/// What fills a schedule, in words: its one run in flight, or its runs at the limit.
fn in_flight_words(oldest: &str, count: i64, limit: i64) -> String {
    if limit == 1 {
        format!("run {oldest} is in flight")
    } else {
        format!("{count} runs are in flight (max_in_flight {limit}), the oldest {oldest}")
    }
}

/// The decision for a run of an exclusive schedule whose lock this transaction holds.
fn exclusive(
    run: &Claimed,
    known: Option<&Blockers>,
    launched: &HashMap<&str, Vec<&str>>,
    queued: &HashMap<&str, i64>,
) -> Decision {
    let schedule = run.schedule_id.as_str();
    let policy = run.overlap_policy;
    let limit = limit(known);
    let in_db = known.map_or(0, |b| b.in_flight_count);
    let in_batch: &[&str] = launched.get(schedule).map_or(&[], Vec::as_slice);
    let count = in_db + i64::try_from(in_batch.len()).unwrap_or(i64::MAX);
    let full = count >= limit;
    // When this batch's launches fill the schedule, a decision made on that stands only
    // if they all go out.
    let behind: Vec<String> = if full && in_db < limit {
        in_batch.iter().map(|key| key.to_string()).collect()
    } else {
        Vec::new()
    };
    let oldest = known
        .and_then(|b| b.in_flight.as_deref())
        .or(in_batch.first().copied());
    let filled = match oldest {
        Some(oldest) if full => Some(in_flight_words(oldest, count, limit)),
        _ => None,
    };
    let queued_in_batch = queued.get(schedule).copied().unwrap_or(0);
    let waiting = known.map_or(0, |b| b.queued) + queued_in_batch;
    let older_waiting = queued_in_batch > 0
        || known
            .and_then(|b| b.first_queued)
            .is_some_and(|first| first < run.fire_at);
    if policy == OverlapPolicy::Skip {
        return match filled {
            Some(what) => Decision::Skip {
                why: SkipReason::Overlap,
                reason: format!("overlap skip: {what}"),
                behind,
            },
            None => Decision::Launch { exclusive: true },
        };
    }
    if !full && !older_waiting {
        return Decision::Launch { exclusive: true };
    }
    if policy == OverlapPolicy::CancelOther && full && in_db < limit {
        return Decision::Defer;
    }
    let (bound, past_bound) = match policy {
        OverlapPolicy::Queue => (
            known.and_then(|b| b.max_queued).map(i64::from),
            SkipReason::QueueFull,
        ),
        _ => (Some(1), SkipReason::BufferFull),
    };
    if bound.is_some_and(|bound| waiting >= bound) {
        let what = match &filled {
            Some(what) => format!("{what} and {waiting} run(s) wait"),
            None => format!("{waiting} run(s) wait"),
        };
        return Decision::Skip {
            why: past_bound,
            reason: format!("{}: {what} (overlap {policy})", past_bound.as_str()),
            behind,
        };
    }
    let victim = match policy {
        OverlapPolicy::CancelOther if full => known.and_then(|b| b.in_flight.clone()),
        _ => None,
    };
    let reason = match (&victim, &filled) {
        (Some(victim), _) => {
            format!("overlap cancel_other: waiting for run {victim} to be cancelled")
        }
        (None, Some(_)) if limit == 1 => {
            format!(
                "overlap {policy}: waiting for run {}",
                oldest.unwrap_or_default()
            )
        }
        (None, Some(what)) => format!("overlap {policy}: waiting while {what}"),
        (None, None) => format!("overlap {policy}: waiting behind older queued runs"),
    };
    Decision::Queue {
        reason,
        behind,
        cancel: victim,
    }
}

#[cfg(test)]
mod tests;
