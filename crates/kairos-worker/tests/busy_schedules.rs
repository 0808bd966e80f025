//! A run whose exclusive schedule another dispatcher's round holds past the run's launch
//! deadline is queued or skipped by its overlap policy, never failed for waiting on a lock;
//! a queued one goes out once nothing holds the schedule. A late run whose schedule was
//! free still fails by the deadline.

use crate::dispatcher_support;

use dispatcher_support::{config, drain, field, key, nats, run, schedule, statuses, workflow};
use kairos_core::RunStatus;
use kairos_testkit::{sqlx, TestDb};
use kairos_worker::dispatcher::Dispatcher;

#[tokio::test]
async fn a_late_run_of_a_held_schedule_follows_its_policy_instead_of_failing() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "q", "queue", None).await;
    schedule(&pool, "k", "skip", None).await;
    schedule(&pool, "free", "queue", None).await;
    // Due 400 s ago: past the tests' 300 s launch deadline.
    run(&pool, &key(1), "q", -400.0).await;
    run(&pool, &key(2), "k", -400.0).await;
    run(&pool, &key(3), "free", -400.0).await;
    // Another dispatcher's round holds `q` and `k` (a pre-staged round waiting for its next
    // wave holds its schedules the same way).
    let mut round_elsewhere = pool.begin().await.expect("begin");
    sqlx::query("select 1 from schedule_dispatch_locks where schedule_id in ('q', 'k') for update")
        .execute(&mut *round_elsewhere)
        .await
        .expect("hold q and k");

    let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), config());
    drain(&dispatcher).await;
    let runs = statuses(&pool).await;
    assert_eq!(runs[&key(1)], RunStatus::Queued);
    assert_eq!(runs[&key(2)], RunStatus::Skipped);
    assert_eq!(runs[&key(3)], RunStatus::Failed, "its schedule was free");
    for n in [1, 2] {
        let reason = field(&pool, &key(n), "reason").await.expect("a reason");
        assert!(reason.contains("held by another dispatcher"), "{reason}");
    }
    assert_eq!(
        field(&pool, &key(3), "reason").await.as_deref(),
        Some("launch deadline passed")
    );

    // That round ends without a run in flight: the sweep frees the queued run, and it goes
    // out.
    round_elsewhere
        .rollback()
        .await
        .expect("end the other round");
    dispatcher_support::sweeper(&pool, dispatcher.launcher())
        .sweep()
        .await
        .expect("sweep");
    drain(&dispatcher).await;
    assert_eq!(statuses(&pool).await[&key(1)], RunStatus::Enqueued);
}
