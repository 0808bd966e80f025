//! Deciding ahead, on real PostgreSQL and nats-server: a pre-staged round takes its exclusive
//! schedules' dispatch locks and reads their blockers while it waits for the wave's tick.
//! What may change before the tick is read again at it: a run in flight then, ended
//! before the tick, does not make the next run skip; and a schedule whose earlier run
//! another round holds is not locked ahead, so that run goes out first.

use crate::dispatcher_support;

use std::time::Duration;

use dispatcher_support::{key, nats, prestaged, run, schedule, statuses, workflow};
use kairos_core::RunStatus;
use kairos_store::dispatch::lock_schedules;
use kairos_store::PgPool;
use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use kairos_worker::dispatcher::Dispatcher;

/// Sets `key`'s status as the intake or a dispatcher would have (`exclusive`: it counts
/// against its schedule's runs in flight).
async fn set_status(pool: &PgPool, key: &str, status: &str) {
    sqlx::query(
        "update schedule_runs set status = $2, exclusive = true, \
           published_at = coalesce(published_at, now()), \
           finished_at = case when $2 = 'SUCCESS' then now() end \
         where idempotency_key = $1",
    )
    .bind(key)
    .bind(status)
    .execute(pool)
    .await
    .expect("status");
}

#[tokio::test]
async fn a_run_in_flight_ahead_of_the_tick_and_ended_before_it_does_not_skip_the_next() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "one", "skip", None).await;
    run(&pool, &key(1), "one", -10.0).await;
    set_status(&pool, &key(1), "STARTED").await;
    run(&pool, &key(2), "one", 2.0).await;
    let dispatcher = Dispatcher::new(pool.clone(), launcher, prestaged(3000));
    let round = tokio::spawn(async move { dispatcher.round().await.expect("round") });
    // The round has claimed key 2 and read its schedule's blockers ahead (key 1 in flight);
    // key 1 ends before key 2's tick.
    tokio::time::sleep(Duration::from_millis(800)).await;
    set_status(&pool, &key(1), "SUCCESS").await;
    let round = round.await.expect("join");
    assert_eq!((round.claimed, round.enqueued, round.skipped), (1, 1, 0));
    assert_eq!(statuses(&pool).await[&key(2)], RunStatus::Enqueued);
}

#[tokio::test]
async fn a_schedule_whose_earlier_run_another_round_holds_is_not_locked_ahead() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "one", "skip", None).await;
    run(&pool, &key(1), "one", 0.5).await;
    run(&pool, &key(2), "one", 2.0).await;
    // Another round holds key 1 (its claim's row lock), so the dispatcher claims key 2 alone.
    let mut other = pool.begin().await.expect("begin");
    sqlx::query("select 1 from schedule_runs where idempotency_key = $1 for update")
        .bind(key(1))
        .execute(&mut *other)
        .await
        .expect("hold key 1");
    let dispatcher = Dispatcher::new(pool.clone(), launcher, prestaged(3000));
    let round = tokio::spawn(async move { dispatcher.round().await.expect("round") });
    tokio::time::sleep(Duration::from_millis(800)).await;
    // Key 1's tick: the other round takes the schedule's lock (the dispatcher did not take
    // it ahead) and publishes key 1.
    let held = lock_schedules(&mut other, &["one".to_string()])
        .await
        .expect("lock");
    assert!(
        held.contains("one"),
        "the schedule was locked ahead of a later run while its earlier one waited"
    );
    sqlx::query(
        "update schedule_runs set status = 'ENQUEUED', exclusive = true, published_at = now() \
         where idempotency_key = $1",
    )
    .bind(key(1))
    .execute(&mut *other)
    .await
    .expect("publish key 1");
    other.commit().await.expect("commit");
    let round = round.await.expect("join");
    assert_eq!((round.claimed, round.enqueued, round.skipped), (1, 0, 1));
    let status = statuses(&pool).await;
    assert_eq!(status[&key(1)], RunStatus::Enqueued);
    assert_eq!(
        status[&key(2)],
        RunStatus::Skipped,
        "key 2 saw key 1 in flight at its tick"
    );
}
