//! The overlap policy at fire time, without IO: for each claimed run, in claim order,
//! launch it, skip it, queue it, or leave it for the next round.

use std::collections::{HashMap, HashSet};

use kairos_core::{OverlapPolicy, RunStatus};
use kairos_store::dispatch::{Blockers, Claimed};

/// What to do with one claimed run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Publish it; `exclusive` under `skip`/`queue`.
    Launch {
        /// Counts against the one-in-flight index.
        exclusive: bool,
    },
    /// `SKIPPED` (overlap `skip`) with the reason. `behind` names a run launched in this
    /// same batch: the skip stands only if that run really goes out.
    Skip {
        /// Why.
        reason: String,
        /// The run of this batch it would overlap.
        behind: Option<String>,
    },
    /// `QUEUED` (overlap `queue`) with the reason; `behind` as for `Skip`.
    Queue {
        /// Why.
        reason: String,
        /// The run of this batch it waits for.
        behind: Option<String>,
    },
    /// Leave it `PENDING`: another dispatcher holds its schedule right now.
    Defer,
}

/// Decides every run of a batch. `held` are the exclusive schedules whose advisory lock
/// this transaction holds; `blockers` what the database says is in flight or queued.
pub(crate) fn decide(
    runs: &[Claimed],
    held: &HashSet<String>,
    blockers: &HashMap<String, Blockers>,
) -> Vec<Decision> {
    let mut launched: HashMap<&str, &str> = HashMap::new();
    let mut queued: HashSet<&str> = HashSet::new();
    runs.iter()
        .map(|run| {
            let schedule = run.schedule_id.as_str();
            let policy = run.overlap_policy;
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
            if policy == OverlapPolicy::Allow {
                return Decision::Launch { exclusive: false };
            }
            if !held.contains(schedule) {
                return Decision::Defer;
            }
            let known = blockers.get(schedule);
            let in_db = known.and_then(|b| b.in_flight.as_deref());
            let in_batch = launched.get(schedule).copied();
            let blocker = in_db.or(in_batch);
            let behind = if in_db.is_none() {
                in_batch.map(str::to_string)
            } else {
                None
            };
            match (policy, blocker) {
                (OverlapPolicy::Skip, Some(key)) => Decision::Skip {
                    reason: format!("overlap skip: run {key} is in flight"),
                    behind,
                },
                (OverlapPolicy::Queue, _)
                    if blocker.is_some()
                        || known
                            .and_then(|b| b.first_queued)
                            .is_some_and(|first| first < run.fire_at)
                        || queued.contains(schedule) =>
                {
                    queued.insert(schedule);
                    let reason = match blocker {
                        Some(key) => format!("overlap queue: waiting for run {key}"),
                        None => "overlap queue: waiting behind older queued runs".to_string(),
                    };
                    Decision::Queue { reason, behind }
                }
                _ => {
                    launched.insert(schedule, run.idempotency_key.as_str());
                    Decision::Launch { exclusive: true }
                }
            }
        })
        .collect()
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
            },
        )]);
        let got = decide(&[retry, run("b", "s", "skip")], &held(&["s"]), &blocked);
        assert_eq!(got[0], Decision::Launch { exclusive: true });
        assert!(matches!(&got[1], Decision::Skip { .. }));
    }

    #[test]
    fn a_schedule_held_by_another_dispatcher_is_deferred() {
        let got = decide(&[run("a", "s", "skip")], &held(&[]), &HashMap::new());
        assert_eq!(got, vec![Decision::Defer]);
    }
}
