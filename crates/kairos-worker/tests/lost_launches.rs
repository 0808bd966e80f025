//! Lost launches on real PostgreSQL and nats-server: a run published but never started —
//! because the broker lost its message after the PubAck (the stream is purged here), or
//! because no executor picks it up — is re-published after its start timeout, without
//! doubling a message that is still stored, and fails as never started after
//! `max_republish` re-publishes, so it cannot wedge its schedule.

use crate::dispatcher_support;

use std::sync::Arc;
use std::time::Duration;

use dispatcher_support::{
    config, key, nats, run, schedule, spawn_dispatcher, stream_ids, until, workflow,
};
use kairos_core::RunStatus;
use kairos_launcher::NatsLauncher;
use kairos_store::{runs, PgPool};
use kairos_testkit::TestDb;
use kairos_worker::dispatcher::Dispatcher;
use kairos_worker::intake::{parse_report, Intake};
use kairos_worker::sweep::{SweepConfig, Sweeper};
use serde_json::json;

/// A sweeper every 100 ms with a 1 s start timeout and `max_republish` re-publishes.
fn lost_launch_sweeper(
    pool: &PgPool,
    launcher: &NatsLauncher,
    max_republish: u32,
) -> Sweeper<NatsLauncher> {
    let config = SweepConfig {
        every: Duration::from_millis(100),
        start_timeout: Duration::from_secs(1),
        max_republish,
        ..SweepConfig::default()
    };
    Sweeper::new(pool.clone(), launcher.clone(), config)
}

async fn run_of(pool: &PgPool, key: &str) -> kairos_core::Run {
    runs::get(pool, key).await.expect("read").expect("run")
}

async fn republished(pool: &PgPool, key: &str) -> i32 {
    kairos_testkit::sqlx::query_scalar(
        "select republished from schedule_runs where idempotency_key = $1",
    )
    .bind(key)
    .fetch_one(pool)
    .await
    .expect("republished")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_the_stream_lost_is_published_again_and_the_schedule_goes_on() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "s", "skip", None).await;
    let first = key(1);
    run(&pool, &first, "s", -0.1).await;
    let looping = spawn_dispatcher(
        Arc::new(Dispatcher::new(pool.clone(), launcher.clone(), config())),
        lost_launch_sweeper(&pool, &launcher, 3),
    );
    until(Duration::from_secs(10), "published", || async {
        run_of(&pool, &first).await.status == RunStatus::Enqueued
    })
    .await;
    // The broker loses the acknowledged message.
    launcher
        .jetstream()
        .get_stream("KAIROS_LAUNCH")
        .await
        .expect("stream")
        .purge()
        .await
        .expect("purge");
    assert!(stream_ids(&launcher).await.is_empty());
    until(Duration::from_secs(10), "re-published", || async {
        stream_ids(&launcher).await.len() == 1
    })
    .await;
    let id = &stream_ids(&launcher).await[0];
    assert!(id.starts_with(&first), "the message of the same run: {id}");
    let intake = Intake::new(pool.clone());
    for status in ["STARTED", "SUCCESS"] {
        let report =
            parse_report(&first, &json!({"status": status, "executor_id": "e1"})).expect("report");
        intake.report(&first, &report).await.expect("recorded");
    }
    assert_eq!(republished(&pool, &first).await, 1);
    // The schedule is not wedged: its next tick launches.
    let second = key(2);
    run(&pool, &second, "s", 0.0).await;
    until(
        Duration::from_secs(10),
        "the next tick launches",
        || async { run_of(&pool, &second).await.status == RunStatus::Enqueued },
    )
    .await;
    looping.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_nobody_starts_is_not_doubled_and_fails_as_never_started() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "s", "skip", None).await;
    let k = key(1);
    run(&pool, &k, "s", -0.1).await;
    let looping = spawn_dispatcher(
        Arc::new(Dispatcher::new(pool.clone(), launcher.clone(), config())),
        lost_launch_sweeper(&pool, &launcher, 2),
    );
    until(
        Duration::from_secs(15),
        "failed as never started",
        || async { run_of(&pool, &k).await.status == RunStatus::Failed },
    )
    .await;
    looping.end().await;
    let run = run_of(&pool, &k).await;
    assert!(
        run.reason
            .as_deref()
            .is_some_and(|r| r.contains("never started")),
        "{:?}",
        run.reason
    );
    assert!(
        run.dead_lettered_at.is_some(),
        "one attempt allowed: dead letter"
    );
    assert_eq!(republished(&pool, &k).await, 2);
    assert_eq!(
        stream_ids(&launcher).await,
        vec![k.clone()],
        "the message was stored all along: re-publishing doubled nothing"
    );
}
