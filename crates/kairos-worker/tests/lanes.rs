//! Dispatch lanes on real PostgreSQL and nats-server: a burst bigger than one batch is
//! claimed ahead whole, in several batches held side by side until their tick, and a run
//! due now is never held up behind those pre-staged batches.

use crate::dispatcher_support;

use std::sync::Arc;
use std::time::Duration;

use dispatcher_support::{config, key, nats, run, schedule, spawn_dispatcher, until, workflow};
use kairos_store::PgPool;
use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use kairos_worker::dispatcher::{Dispatcher, DispatcherConfig};

fn lanes(lanes: usize, batch_size: i64, prestage_ms: u64) -> DispatcherConfig {
    let mut config = config();
    config.lanes = lanes;
    config.batch_size = batch_size;
    config.prestage = Duration::from_millis(prestage_ms);
    config
}

/// Runs with `status`.
async fn count(pool: &PgPool, status: &str) -> i64 {
    sqlx::query_scalar("select count(*) from schedule_runs where status = $1")
        .bind(status)
        .fetch_one(pool)
        .await
        .expect("count")
}

/// `PENDING` runs no transaction has locked yet (a claim sets a row's `xmax`). Read without
/// locking, so the probe never makes a claim skip a row.
async fn never_claimed(pool: &PgPool) -> i64 {
    sqlx::query_scalar(
        "select count(*) from schedule_runs where status = 'PENDING' and xmax::text = '0'",
    )
    .fetch_one(pool)
    .await
    .expect("never claimed")
}

#[tokio::test]
async fn a_burst_of_several_batches_is_claimed_whole_before_its_tick() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "s", "allow", None).await;
    for n in 1..=35 {
        run(&pool, &key(n), "s", 2.5).await;
    }
    let sweeper = dispatcher_support::sweeper(&pool, &launcher);
    let dispatcher = Arc::new(Dispatcher::new(pool.clone(), launcher, lanes(4, 10, 4000)));
    let looping = spawn_dispatcher(dispatcher, sweeper);
    until(
        Duration::from_secs(2),
        "the burst claimed ahead",
        || async { never_claimed(&pool).await == 0 },
    )
    .await;
    assert_eq!(
        count(&pool, "PENDING").await,
        35,
        "claimed in four batches of at most ten, none published before its fire_at"
    );
    until(Duration::from_secs(10), "the burst published", || async {
        count(&pool, "ENQUEUED").await == 35
    })
    .await;
    let early: i64 =
        sqlx::query_scalar("select count(*) from schedule_runs where published_at < fire_at")
            .fetch_one(&pool)
            .await
            .expect("early");
    assert_eq!(early, 0, "a pre-staged run went out before its fire_at");
    looping.end().await;
}

#[tokio::test]
async fn a_run_due_now_is_not_held_behind_prestaged_batches() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "s", "allow", None).await;
    for n in 1..=10 {
        run(&pool, &key(n), "s", 6.0).await;
    }
    let sweeper = dispatcher_support::sweeper(&pool, &launcher);
    let dispatcher = Arc::new(Dispatcher::new(pool.clone(), launcher, lanes(2, 10, 8000)));
    let looping = spawn_dispatcher(dispatcher, sweeper);
    until(Duration::from_secs(2), "the ten claimed ahead", || async {
        never_claimed(&pool).await == 0
    })
    .await;
    // A trigger-now: a run due now and the wake-up the store sends with it.
    run(&pool, &key(99), "s", -0.1).await;
    sqlx::query("select pg_notify('kairos_runs', '')")
        .execute(&pool)
        .await
        .expect("notify");
    until(
        Duration::from_secs(3),
        "the run due now published",
        || async { count(&pool, "ENQUEUED").await == 1 },
    )
    .await;
    assert_eq!(
        count(&pool, "PENDING").await,
        10,
        "the pre-staged batch still waits for its fire_at"
    );
    let enqueued: String =
        sqlx::query_scalar("select idempotency_key from schedule_runs where status = 'ENQUEUED'")
            .fetch_one(&pool)
            .await
            .expect("enqueued");
    assert_eq!(enqueued, key(99));
    looping.end().await;
}
