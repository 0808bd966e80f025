//! Lifecycle rules that were once broken, each pinned by a test on real PostgreSQL and
//! nats-server: a released `QUEUED` run's launch deadline counts from its release, and a
//! status report about a run that was never published is refused, never applied (and never
//! a database error).

use crate::dispatcher_support;

use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use std::time::Duration;

use dispatcher_support::{config, drain, key, nats, report, run, schedule, statuses, workflow};
use kairos_core::{Reported, RunStatus};
use kairos_store::PgPool;
use kairos_worker::dispatcher::Dispatcher;
use kairos_worker::intake::Applied;

/// Moves a run's `fire_at` (and tick) `seconds` into the past, as if it had waited that long.
async fn age(pool: &PgPool, key: &str, seconds: i32) {
    sqlx::query(
        "update schedule_runs set fire_at = fire_at - make_interval(secs => $2), \
         run_at = run_at - make_interval(secs => $2) where idempotency_key = $1",
    )
    .bind(key)
    .bind(seconds)
    .execute(pool)
    .await
    .expect("age run");
}

/// Bug: with `queue`, a run that waited behind a long run longer than the launch deadline
/// was released and then FAILED "launch deadline passed" (counted from its old fire_at),
/// so the queue never drained.
#[tokio::test]
async fn a_released_queued_run_gets_its_deadline_from_the_release() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "q", "queue", None).await;
    let mut config = config();
    config.launch_deadline = Duration::from_secs(15);
    let dispatcher = Dispatcher::new(pool.clone(), launcher, config);
    run(&pool, &key(1), "q", -1.0).await;
    run(&pool, &key(2), "q", -0.5).await;
    let _ = drain(&dispatcher).await;
    let runs = statuses(&pool).await;
    assert_eq!(
        (runs[&key(1)], runs[&key(2)]),
        (RunStatus::Enqueued, RunStatus::Queued)
    );
    // The first run is long: the queued one has now waited 30 s, twice the deadline.
    age(&pool, &key(2), 30).await;
    report(&pool, &key(1), Reported::Started, "e1").await;
    report(&pool, &key(1), Reported::Success, "e1").await;
    assert_eq!(statuses(&pool).await[&key(2)], RunStatus::Pending);
    let _ = drain(&dispatcher).await;
    assert_eq!(
        statuses(&pool).await[&key(2)],
        RunStatus::Enqueued,
        "released just now: inside its deadline"
    );
}

/// Bug: STARTED for a never-published run answered 500 (unique index) or, later, made a
/// future tick STARTED and wedged the schedule. A report about a run that was never
/// published is refused.
#[tokio::test]
async fn reports_on_runs_that_were_never_published_are_refused() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "s", "skip", None).await;
    schedule(&pool, "q", "queue", None).await;
    let dispatcher = Dispatcher::new(pool.clone(), launcher, config());
    run(&pool, &key(1), "s", -1.0).await;
    run(&pool, &key(5), "q", -1.0).await;
    let _ = drain(&dispatcher).await;
    // In flight: key(1) of `s`, key(5) of `q`. Then: a tick of `s` 257 s in the future, a
    // due tick of `s` not yet dispatched, and a queued run of `q`.
    run(&pool, &key(2), "s", 257.0).await;
    run(&pool, &key(3), "s", -0.1).await;
    run(&pool, &key(6), "q", -0.5).await;
    let _ = drain(&dispatcher).await;
    let runs = statuses(&pool).await;
    assert_eq!(runs[&key(6)], RunStatus::Queued);
    assert_eq!(
        runs[&key(3)],
        RunStatus::Skipped,
        "skipped by the dispatcher"
    );
    run(&pool, &key(4), "s", -0.1).await;

    let future = report(&pool, &key(2), Reported::Started, "e2").await;
    assert!(matches!(future, Applied::Unpublished(_)), "{future:?}");
    let queued = report(&pool, &key(6), Reported::Started, "e2").await;
    assert!(matches!(queued, Applied::Unpublished(_)), "{queued:?}");
    let skipped = report(&pool, &key(3), Reported::Success, "e2").await;
    assert!(matches!(skipped, Applied::Unpublished(_)), "{skipped:?}");
    // Due and PENDING (it could be a dispatcher that died after the PubAck), but another
    // run of the exclusive schedule is in flight: it cannot be in flight too.
    let blocked = report(&pool, &key(4), Reported::Started, "e2").await;
    assert!(
        matches!(blocked, Applied::Blocked { ref in_flight, .. } if *in_flight == key(1)),
        "{blocked:?}"
    );
    let runs = statuses(&pool).await;
    assert_eq!(
        [runs[&key(2)], runs[&key(4)], runs[&key(6)]],
        [RunStatus::Pending, RunStatus::Pending, RunStatus::Queued],
        "nothing moved"
    );
    // Once the in-flight run ends, the due run is no longer blocked, and the future tick is
    // still refused: nothing wedges the schedule.
    report(&pool, &key(1), Reported::Success, "e1").await;
    let future = report(&pool, &key(2), Reported::Started, "e2").await;
    assert!(matches!(future, Applied::Unpublished(_)), "{future:?}");
}

/// A dispatcher that died between the PubAck and its commit leaves a due PENDING run whose
/// message is out: the executor's report on it is accepted.
#[tokio::test]
async fn a_report_on_a_due_pending_run_is_accepted() {
    let db = TestDb::new().await;
    let pool = db.pool();
    workflow(&pool).await;
    schedule(&pool, "s", "skip", None).await;
    run(&pool, &key(1), "s", -1.0).await;
    let started = report(&pool, &key(1), Reported::Started, "e1").await;
    assert!(
        matches!(started, Applied::Moved(ref run) if run.status == RunStatus::Started),
        "{started:?}"
    );
}

/// Bug (found by the chaos suite, around a PostgreSQL restart): a dispatcher's PubAck was
/// not recorded, the executor's STARTED moved the due PENDING run to STARTED with no
/// `published_at`, and its SUCCESS was then refused as "never published": the run stayed
/// STARTED forever. A report accepted on a due PENDING run records the run as published.
#[tokio::test]
async fn a_run_started_before_its_publish_was_recorded_can_finish() {
    let db = TestDb::new().await;
    let pool = db.pool();
    workflow(&pool).await;
    schedule(&pool, "s", "allow", None).await;
    run(&pool, &key(1), "s", -1.0).await;
    run(&pool, &key(2), "s", -0.5).await;
    let started = report(&pool, &key(1), Reported::Started, "e1").await;
    assert!(matches!(started, Applied::Moved(_)), "{started:?}");
    let success = report(&pool, &key(1), Reported::Success, "e1").await;
    assert!(
        matches!(success, Applied::Moved(ref run) if run.status == RunStatus::Success),
        "{success:?}"
    );
    // Straight to SUCCESS, then a late STARTED: the STARTED changes nothing, and is not
    // refused as a report about a run that was never published.
    let success = report(&pool, &key(2), Reported::Success, "e1").await;
    assert!(matches!(success, Applied::Moved(_)), "{success:?}");
    let late = report(&pool, &key(2), Reported::Started, "e1").await;
    assert!(matches!(late, Applied::Unchanged(_)), "{late:?}");
    let unpublished: i64 =
        sqlx::query_scalar("select count(*) from schedule_runs where published_at is null")
            .fetch_one(&pool)
            .await
            .expect("count");
    assert_eq!(
        unpublished, 0,
        "a run an executor reported on was published"
    );
}
