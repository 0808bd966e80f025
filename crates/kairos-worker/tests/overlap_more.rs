//! Overlap `buffer_one`, `cancel_other` and a bounded `queue` on real PostgreSQL and
//! nats-server: `buffer_one` keeps exactly one run waiting behind a long run and skips the
//! rest (`buffer_full`); `queue` with `max_queued: 2` skips past two (`queue_full`);
//! `cancel_other` cancels the run in flight and launches the new one once the executor
//! confirms, or once the cancel times out.

use crate::dispatcher_support;

use std::sync::Arc;
use std::time::Duration;

use dispatcher_support::{
    config, drain, field, key, nats, run, schedule, spawn_dispatcher, statuses, until, workflow,
};
use kairos_core::RunStatus;
use kairos_launcher::status::read_stream;
use kairos_launcher::NatsLauncher;
use kairos_store::PgPool;
use kairos_testkit::{sqlx, TestDb};
use kairos_worker::dispatcher::Dispatcher;
use kairos_worker::intake::{parse_report, Intake};
use kairos_worker::sweep::{SweepConfig, Sweeper};
use serde_json::json;

async fn say(intake: &Intake, key: &str, status: &str) {
    let report =
        parse_report(key, &json!({"status": status, "executor_id": "e1"})).expect("a valid report");
    intake.report(key, &report).await.expect("recorded");
}

/// Schedule `s1` under `overlap` with run 1 published and STARTED, and runs 2..=`n` due
/// behind it, dispatched.
async fn long_run_and_ticks(
    pool: &PgPool,
    dispatcher: &Dispatcher<NatsLauncher>,
    intake: &Intake,
    overlap: &str,
    n: u64,
) {
    workflow(pool).await;
    schedule(pool, "s1", overlap, None).await;
    run(pool, &key(1), "s1", -60.0).await;
    dispatcher.round().await.expect("round");
    say(intake, &key(1), "STARTED").await;
    for k in 2..=n {
        // Older ticks first: fire_at in tick order.
        run(pool, &key(k), "s1", -50.0 + k as f64).await;
    }
    drain(dispatcher).await;
}

/// The statuses of runs 1..=n, in key order.
async fn in_order(pool: &PgPool, n: u64) -> Vec<RunStatus> {
    let all = statuses(pool).await;
    (1..=n).map(|k| all[&key(k)]).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffer_one_keeps_exactly_one_waiting_and_skips_the_rest() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), config());
    let intake = Intake::new(pool.clone());
    long_run_and_ticks(&pool, &dispatcher, &intake, "buffer_one", 5).await;
    use RunStatus::{Enqueued, Queued, Skipped, Started, Success};
    assert_eq!(
        in_order(&pool, 5).await,
        [Started, Queued, Skipped, Skipped, Skipped]
    );
    for k in 3..=5 {
        let reason = field(&pool, &key(k), "reason").await.expect("a reason");
        assert!(reason.starts_with("buffer_full"), "{reason}");
    }
    // A further tick while one waits is skipped too.
    run(&pool, &key(6), "s1", -1.0).await;
    drain(&dispatcher).await;
    assert_eq!(in_order(&pool, 6).await[5], Skipped);
    // The long run ends: the waiting one goes out, and then one may wait again.
    say(&intake, &key(1), "SUCCESS").await;
    drain(&dispatcher).await;
    assert_eq!(in_order(&pool, 2).await, [Success, Enqueued]);
    run(&pool, &key(7), "s1", -1.0).await;
    run(&pool, &key(8), "s1", -0.5).await;
    drain(&dispatcher).await;
    let all = statuses(&pool).await;
    assert_eq!((all[&key(7)], all[&key(8)]), (Queued, Skipped));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_bounded_by_max_queued_skips_past_it() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), config());
    let intake = Intake::new(pool.clone());
    workflow(&pool).await;
    schedule(&pool, "s0", "queue", None).await; // unbounded: every tick waits
    sqlx::query(
        "insert into schedules (schedule_id, workflow_id, version, user_id, cron_expr, \
                 timezone, overlap_policy, max_queued) \
                 values ('s1', 'wf', 1, 'u', '* * * * *', 'UTC', 'queue', 2)",
    )
    .execute(&pool)
    .await
    .expect("bounded queue");
    run(&pool, &key(1), "s1", -60.0).await;
    dispatcher.round().await.expect("round");
    say(&intake, &key(1), "STARTED").await;
    for k in 2..=5 {
        run(&pool, &key(k), "s1", -50.0 + k as f64).await;
    }
    drain(&dispatcher).await;
    use RunStatus::{Queued, Skipped, Started};
    assert_eq!(
        in_order(&pool, 5).await,
        [Started, Queued, Queued, Skipped, Skipped]
    );
    for k in 4..=5 {
        let reason = field(&pool, &key(k), "reason").await.expect("a reason");
        assert!(reason.starts_with("queue_full"), "{reason}");
    }
    // Without a bound, everything waits.
    run(&pool, &key(10), "s0", -60.0).await;
    dispatcher.round().await.expect("round");
    for k in 11..=14 {
        run(&pool, &key(k), "s0", -50.0 + k as f64).await;
    }
    drain(&dispatcher).await;
    let all = statuses(&pool).await;
    assert!((11..=14).all(|k| all[&key(k)] == Queued), "{all:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_other_cancels_the_run_in_flight_and_launches_after_the_confirmation() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), config());
    let intake = Intake::new(pool.clone());
    long_run_and_ticks(&pool, &dispatcher, &intake, "cancel_other", 3).await;
    use RunStatus::{Cancelled, Cancelling, Enqueued, Queued, Skipped};
    assert_eq!(in_order(&pool, 3).await, [Cancelling, Queued, Skipped]);
    let reason = field(&pool, &key(3), "reason").await.expect("a reason");
    assert!(reason.starts_with("buffer_full"), "{reason}");
    let sent = read_stream(&launcher, "KAIROS_CANCEL").await.expect("read");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].subject, "kairos.cancel.wf");
    let body: serde_json::Value = serde_json::from_slice(&sent[0].payload).expect("json");
    assert_eq!(body["idempotency_key"], json!(key(1)));
    // Still waiting while the executor has not confirmed.
    drain(&dispatcher).await;
    assert_eq!(in_order(&pool, 2).await, [Cancelling, Queued]);

    say(&intake, &key(1), "CANCELLED").await;
    drain(&dispatcher).await;
    assert_eq!(in_order(&pool, 2).await, [Cancelled, Enqueued]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_other_launches_after_the_cancel_times_out() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    let dispatcher = Arc::new(Dispatcher::new(pool.clone(), launcher.clone(), config()));
    let settings = SweepConfig {
        cancel_timeout: Duration::from_millis(300),
        ..dispatcher_support::sweep_config()
    };
    let sweeper = Sweeper::new(pool.clone(), launcher.clone(), settings);
    let intake = Intake::new(pool.clone());
    long_run_and_ticks(&pool, &dispatcher, &intake, "cancel_other", 2).await;
    assert_eq!(
        in_order(&pool, 2).await,
        [RunStatus::Cancelling, RunStatus::Queued]
    );
    let looping = spawn_dispatcher(dispatcher.clone(), sweeper);
    until(Duration::from_secs(10), "the new run launches", || async {
        statuses(&pool).await[&key(2)] == RunStatus::Enqueued
    })
    .await;
    looping.end().await;
    assert_eq!(statuses(&pool).await[&key(1)], RunStatus::Cancelled);
    let reason = field(&pool, &key(1), "reason").await.expect("a reason");
    assert!(reason.contains("did not confirm"), "{reason}");
}
