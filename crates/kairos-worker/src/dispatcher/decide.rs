//! The overlap policy at fire time, without IO: for each claimed run, in claim order,
//! launch it, skip it, queue it (asking the run in flight to cancel, under `cancel_other`),
//! or leave it for the next round.
//!
//! Every policy but `allow` is exclusive: at most one run of the schedule in flight. A run
//! that cannot go out waits (`QUEUED`) up to a bound — the schedule's `max_queued` under
//! `queue` (unbounded without one), one under `buffer_one` and `cancel_other` — and past it
//! is `SKIPPED` with reason `queue_full` or `buffer_full`; under `skip` it is `SKIPPED` at
//! once.

use std::collections::{HashMap, HashSet};

use kairos_core::{OverlapPolicy, RunStatus};
use kairos_store::dispatch::{Blockers, Claimed};

use crate::metrics::SkipReason;

/// What to do with one claimed run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Publish it; `exclusive` under every policy but `allow`.
    Launch {
        /// Counts against the one-in-flight index.
        exclusive: bool,
    },
    /// `SKIPPED` (overlap `skip`, or a full queue or buffer) with the reason. `behind`
    /// names a run launched in this same batch: the skip stands only if that run really
    /// goes out.
    Skip {
        /// Why, as counted: overlap `skip`, or past the queue's or the buffer's bound.
        why: SkipReason,
        /// Why, as the run records it (starts with `queue_full` or `buffer_full` past a
        /// bound).
        reason: String,
        /// The run of this batch it would overlap.
        behind: Option<String>,
    },
    /// `QUEUED` (overlap `queue`, `buffer_one`, `cancel_other`) with the reason; `behind`
    /// as for `Skip`.
    Queue {
        /// Why.
        reason: String,
        /// The run of this batch it waits for.
        behind: Option<String>,
        /// Under `cancel_other`: the run in flight to cancel (in the same transaction).
        cancel: Option<String>,
    },
    /// Leave it `PENDING`: another dispatcher holds its schedule right now (or, under
    /// `cancel_other`, a run of this batch went out first: the next round cancels it).
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
    let mut launched: HashMap<&str, &str> = HashMap::new();
    let mut queued: HashMap<&str, i64> = HashMap::new();
    runs.iter()
        .map(|run| {
            let schedule = run.schedule_id.as_str();
            if run.status == RunStatus::Retrying {
                // Its next attempt: it is the run holding the schedule, so nothing it could
                // overlap with can be in flight.
                if run.exclusive && !held.contains(schedule) {
                    return Decision::Defer;
                }
                launched.insert(schedule, run.idempotency_key.as_str());
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
                Decision::Launch { .. } => {
                    launched.insert(schedule, run.idempotency_key.as_str());
                }
                Decision::Queue { .. } => *queued.entry(schedule).or_default() += 1,
                _ => {}
            }
            decision
        })
        .collect()
}

/// The decision for a run of an exclusive schedule that another dispatcher holds: as if a
/// run were in flight (the one that dispatcher is deciding or publishing), whatever the
/// database shows yet. A run queued this way is released when the schedule's run in flight
/// ends, or by the sweep when nothing holds the schedule.
fn busy(
    run: &Claimed,
    known: Option<&Blockers>,
    launched: &HashMap<&str, &str>,
    queued: &HashMap<&str, i64>,
) -> Decision {
    let mut known = known.cloned().unwrap_or_default();
    let holder_unseen = known.in_flight.is_none();
    if holder_unseen {
        known.in_flight = Some(ANOTHER_DISPATCHER.to_string());
    }
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

/// The decision for a run of an exclusive schedule whose lock this transaction holds.
fn exclusive(
    run: &Claimed,
    known: Option<&Blockers>,
    launched: &HashMap<&str, &str>,
    queued: &HashMap<&str, i64>,
) -> Decision {
    let schedule = run.schedule_id.as_str();
    let policy = run.overlap_policy;
    let in_db = known.and_then(|b| b.in_flight.as_deref());
    let in_batch = launched.get(schedule).copied();
    let blocker = in_db.or(in_batch);
    let behind = if in_db.is_none() {
        in_batch.map(str::to_string)
    } else {
        None
    };
    let queued_in_batch = queued.get(schedule).copied().unwrap_or(0);
    let waiting = known.map_or(0, |b| b.queued) + queued_in_batch;
    let older_waiting = queued_in_batch > 0
        || known
            .and_then(|b| b.first_queued)
            .is_some_and(|first| first < run.fire_at);
    if policy == OverlapPolicy::Skip {
        return match blocker {
            Some(key) => Decision::Skip {
                why: SkipReason::Overlap,
                reason: format!("overlap skip: run {key} is in flight"),
                behind,
            },
            None => Decision::Launch { exclusive: true },
        };
    }
    if blocker.is_none() && !older_waiting {
        return Decision::Launch { exclusive: true };
    }
    if policy == OverlapPolicy::CancelOther && in_db.is_none() && in_batch.is_some() {
        return Decision::Defer;
    }
    let (bound, full) = match policy {
        OverlapPolicy::Queue => (
            known.and_then(|b| b.max_queued).map(i64::from),
            SkipReason::QueueFull,
        ),
        _ => (Some(1), SkipReason::BufferFull),
    };
    if bound.is_some_and(|bound| waiting >= bound) {
        let what = match blocker {
            Some(key) => format!("run {key} is in flight and {waiting} run(s) wait"),
            None => format!("{waiting} run(s) wait"),
        };
        return Decision::Skip {
            why: full,
            reason: format!("{}: {what} (overlap {policy})", full.as_str()),
            behind,
        };
    }
    let reason = match (policy, blocker) {
        (OverlapPolicy::CancelOther, Some(key)) => {
            format!("overlap cancel_other: waiting for run {key} to be cancelled")
        }
        (_, Some(key)) => format!("overlap {policy}: waiting for run {key}"),
        (_, None) => format!("overlap {policy}: waiting behind older queued runs"),
    };
    let cancel = match policy {
        OverlapPolicy::CancelOther => in_db.map(str::to_string),
        _ => None,
    };
    Decision::Queue {
        reason,
        behind,
        cancel,
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
        assert!(matches!(&got[1], Decision::Skip { behind: Some(k), .. } if k == "a"));
    }

    #[test]
    fn queue_waits_for_the_database_in_flight_run_and_older_queued_runs() {
        let blocked = HashMap::from([(
            "s".to_string(),
            Blockers {
                schedule_id: "s".into(),
                in_flight: Some("x".into()),
                first_queued: None,
                ..Blockers::default()
            },
        )]);
        let got = decide(&[run("a", "s", "queue")], &held(&["s"]), &blocked);
        assert!(matches!(&got[0], Decision::Queue { behind: None, .. }));
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
}
