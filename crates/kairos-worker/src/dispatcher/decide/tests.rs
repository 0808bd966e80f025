//! The overlap decisions of [`super::decide`], case by case.

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
        home_region: None,
        fallback_regions: Vec::new(),
        launch_region: None,
        region: None,
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
