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
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn run(key: &str, schedule: &str, policy: &str) -> Claimed {
        let policy: OverlapPolicy = policy.parse().expect("a policy name");
        let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        Claimed {
            idempotency_key: key.into(),
            schedule_id: schedule.into(),
            run_at: at,
            fire_at: at,
            source: kairos_core::RunSource::Schedule,
            status: RunStatus::Pending,
            attempt: 1,
            exclusive: false,
            workflow_id: "w".into(),
            version: 1,
            user_id: "u".into(),
            overlap_policy: policy,
            late: false,
            revision: None,
            schedule_revision: Some(1),
        }
    }

    fn held(ids: &[&str]) -> HashSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn allow_always_launches_non_exclusive() {
        let runs = [run("a", "s", "allow"), run("b", "s", "allow")];
        let got = decide(&runs, &held(&[]), &HashMap::new());
        assert_eq!(got, vec![Decision::Launch { exclusive: false }; 2]);
    }

    #[test]
    fn skip_launches_the_first_and_skips_the_rest_of_the_batch() {
        let runs = [run("a", "s", "skip"), run("b", "s", "skip")];
        let got = decide(&runs, &held(&["s"]), &HashMap::new());
        assert_eq!(got[0], Decision::Launch { exclusive: true });
        assert!(matches!(&got[1], Decision::Skip { behind, .. } if behind == &["a"]));
    }

    #[test]
    fn queue_waits_for_the_database_in_flight_run_and_older_queued_runs() {
        let blocked = HashMap::from([(
            "s".to_string(),
            Blockers {
                schedule_id: "s".into(),
                in_flight: Some("x".into()),
                in_flight_count: 1,
                first_queued: None,
                ..Blockers::default()
            },
        )]);
        let got = decide(&[run("a", "s", "queue")], &held(&["s"]), &blocked);
        assert!(matches!(&got[0], Decision::Queue { behind, .. } if behind.is_empty()));
        let older = HashMap::from([(
            "s".to_string(),
            Blockers {
                schedule_id: "s".into(),
                in_flight: None,
                first_queued: Some(Utc.with_ymd_and_hms(2025, 12, 31, 0, 0, 0).unwrap()),
                queued: 1,
                ..Blockers::default()
            },
        )]);
        let got = decide(&[run("a", "s", "queue")], &held(&["s"]), &older);
        assert!(matches!(&got[0], Decision::Queue { .. }));
    }

    #[test]
    fn a_retry_launches_and_holds_its_schedule_for_the_rest_of_the_batch() {
        let retry = Claimed {
            status: RunStatus::Retrying,
            attempt: 2,
            exclusive: true,
            ..run("a", "s", "skip")
        };
        let blocked = HashMap::from([(
            "s".to_string(),
            Blockers {
                schedule_id: "s".into(),
                in_flight: Some("a".into()),
                in_flight_count: 1,
                first_queued: None,
                ..Blockers::default()
            },
        )]);
        let got = decide(&[retry, run("b", "s", "skip")], &held(&["s"]), &blocked);
        assert_eq!(got[0], Decision::Launch { exclusive: true });
        assert!(matches!(&got[1], Decision::Skip { .. }));
    }

    fn in_flight(key: &str, queued: i64, max_queued: Option<i32>) -> HashMap<String, Blockers> {
        HashMap::from([(
            "s".to_string(),
            Blockers {
                schedule_id: "s".into(),
                in_flight: Some(key.into()),
                in_flight_count: 1,
                max_in_flight: None,
                first_queued: None,
                queued,
                max_queued,
            },
        )])
    }

    #[test]
    fn buffer_one_queues_one_and_skips_the_rest_as_buffer_full() {
        let runs = [run("a", "s", "buffer_one"), run("b", "s", "buffer_one")];
        let got = decide(&runs, &held(&["s"]), &in_flight("x", 0, None));
        assert!(matches!(&got[0], Decision::Queue { cancel: None, .. }));
        assert!(
            matches!(&got[1], Decision::Skip { why: SkipReason::BufferFull, reason, .. } if reason.starts_with("buffer_full"))
        );
        let got = decide(&runs[..1], &held(&["s"]), &in_flight("x", 1, None));
        assert!(
            matches!(&got[0], Decision::Skip { why: SkipReason::BufferFull, reason, .. } if reason.starts_with("buffer_full"))
        );
    }

    #[test]
    fn queue_is_bounded_by_max_queued_only_when_it_is_set() {
        let runs: Vec<Claimed> = ["a", "b", "c"].map(|k| run(k, "s", "queue")).into();
        let got = decide(&runs, &held(&["s"]), &in_flight("x", 1, Some(2)));
        assert!(matches!(&got[0], Decision::Queue { .. }));
        assert!(
            matches!(&got[1], Decision::Skip { why: SkipReason::QueueFull, reason, .. } if reason.starts_with("queue_full"))
        );
        let got = decide(&runs, &held(&["s"]), &in_flight("x", 5, None));
        assert!(got.iter().all(|d| matches!(d, Decision::Queue { .. })));
    }

    #[test]
    fn cancel_other_asks_the_run_in_flight_to_cancel_and_waits() {
        let runs = [run("a", "s", "cancel_other"), run("b", "s", "cancel_other")];
        let got = decide(&runs, &held(&["s"]), &in_flight("x", 0, None));
        assert!(matches!(&got[0], Decision::Queue { cancel: Some(k), .. } if k == "x"));
        assert!(
            matches!(&got[1], Decision::Skip { why: SkipReason::BufferFull, reason, .. } if reason.starts_with("buffer_full"))
        );
        // Nothing in flight: the first launches; a second of the same batch waits for the
        // next round, which cancels the first.
        let got = decide(&runs, &held(&["s"]), &HashMap::new());
        assert_eq!(got, [Decision::Launch { exclusive: true }, Decision::Defer]);
    }

    #[test]
    fn a_schedule_held_by_another_dispatcher_is_deferred() {
        let got = decide(&[run("a", "s", "skip")], &held(&[]), &HashMap::new());
        assert_eq!(got, vec![Decision::Defer]);
    }

    fn late(key: &str, schedule: &str, policy: &str) -> Claimed {
        Claimed {
            late: true,
            ..run(key, schedule, policy)
        }
    }

    #[test]
    fn a_late_run_whose_schedule_another_dispatcher_holds_follows_its_policy() {
        let none = HashMap::new();
        for policy in ["queue", "buffer_one", "cancel_other"] {
            let got = decide(&[late("a", "s", policy)], &held(&[]), &none);
            assert!(
                matches!(&got[0], Decision::Queue { reason, cancel: None, .. }
                    if reason.contains("held by another dispatcher")),
                "{policy}: {got:?}"
            );
        }
        let got = decide(&[late("a", "s", "skip")], &held(&[]), &none);
        assert!(
            matches!(&got[0], Decision::Skip { why: SkipReason::Overlap, reason, .. } if reason.starts_with("overlap skip")),
            "{got:?}"
        );
        // Its queue's bound still holds: one waiting already under buffer_one.
        let got = decide(
            &[late("a", "s", "buffer_one")],
            &held(&[]),
            &in_flight("x", 1, None),
        );
        assert!(
            matches!(&got[0], Decision::Skip { why: SkipReason::BufferFull, reason, .. } if reason.starts_with("buffer_full")),
            "{got:?}"
        );
    }

    #[test]
    fn a_late_run_whose_schedule_is_free_fails_and_one_behind_a_run_in_flight_waits() {
        let got = decide(&[late("a", "s", "queue")], &held(&["s"]), &HashMap::new());
        assert_eq!(got, [Decision::Late]);
        let got = decide(
            &[late("a", "s", "queue")],
            &held(&["s"]),
            &in_flight("x", 0, None),
        );
        assert!(matches!(&got[0], Decision::Queue { .. }), "{got:?}");
    }
    fn limited(in_flight: &[&str], max_in_flight: i32, queued: i64) -> HashMap<String, Blockers> {
        HashMap::from([(
            "s".to_string(),
            Blockers {
                schedule_id: "s".into(),
                in_flight: in_flight.first().map(|key| key.to_string()),
                in_flight_count: in_flight.len() as i64,
                max_in_flight: Some(max_in_flight),
                first_queued: None,
                queued,
                max_queued: None,
            },
        )])
    }

    #[test]
    fn skip_launches_up_to_max_in_flight_and_skips_behind_the_batch() {
        let runs: Vec<Claimed> = ["a", "b", "c"].map(|k| run(k, "s", "skip")).into();
        let got = decide(&runs, &held(&["s"]), &limited(&["x"], 3, 0));
        assert_eq!(got[0], Decision::Launch { exclusive: true });
        assert_eq!(got[1], Decision::Launch { exclusive: true });
        assert!(
            matches!(&got[2], Decision::Skip { why: SkipReason::Overlap, reason, behind }
                if behind == &["a", "b"]
                    && reason == "overlap skip: 3 runs are in flight (max_in_flight 3), the oldest x"),
            "{got:?}"
        );
        // Full in the database: nothing of the batch stands behind it.
        let got = decide(&runs[..1], &held(&["s"]), &limited(&["x", "y", "z"], 3, 0));
        assert!(
            matches!(&got[0], Decision::Skip { behind, .. } if behind.is_empty()),
            "{got:?}"
        );
    }

    #[test]
    fn a_retry_keeps_its_own_slot_and_takes_no_other() {
        let retry = Claimed {
            status: RunStatus::Retrying,
            attempt: 2,
            exclusive: true,
            ..run("r", "s", "skip")
        };
        let got = decide(
            &[retry, run("b", "s", "skip")],
            &held(&["s"]),
            &limited(&["r"], 2, 0),
        );
        assert_eq!(got, vec![Decision::Launch { exclusive: true }; 2]);
    }

    #[test]
    fn cancel_other_cancels_the_oldest_once_the_schedule_is_full() {
        let runs = [run("a", "s", "cancel_other")];
        let got = decide(&runs, &held(&["s"]), &limited(&["x", "y"], 2, 0));
        assert!(
            matches!(&got[0], Decision::Queue { cancel: Some(k), .. } if k == "x"),
            "{got:?}"
        );
        let got = decide(&runs, &held(&["s"]), &limited(&["x"], 2, 0));
        assert_eq!(got, [Decision::Launch { exclusive: true }]);
        // Filled by this batch: the next round cancels.
        let two = [run("a", "s", "cancel_other"), run("b", "s", "cancel_other")];
        let got = decide(&two, &held(&["s"]), &limited(&["x"], 2, 0));
        assert_eq!(got, [Decision::Launch { exclusive: true }, Decision::Defer]);
    }

    #[test]
    fn queue_waits_once_full_and_launches_while_a_slot_is_free() {
        let runs: Vec<Claimed> = ["a", "b", "c"].map(|k| run(k, "s", "queue")).into();
        let got = decide(&runs, &held(&["s"]), &limited(&[], 2, 0));
        assert_eq!(got[..2], vec![Decision::Launch { exclusive: true }; 2]);
        assert!(
            matches!(&got[2], Decision::Queue { reason, behind, cancel: None }
                if behind == &["a", "b"] && reason.contains("max_in_flight 2")),
            "{got:?}"
        );
    }
}
