//! A process killed (abort, as `kill -9`) in the middle of applying a batch of status
//! reports loses none and applies none twice: killed before its commit, nothing of the
//! batch is recorded and every report is applied once by the next consumer; killed after
//! its commit but before its acknowledgements, the redelivered reports change nothing.

use crate::dispatcher_support;

use std::process::Command;
use std::time::Duration;

use dispatcher_support::{key, nats, run, schedule, spawn_status_intake, until, workflow};
use kairos_core::RunStatus;
use kairos_launcher::status::{publish_status, STATUS_CONSUMER, STATUS_STREAM};
use kairos_store::PgPool;
use kairos_testkit::{sqlx, TestDb};
use serde_json::json;

const RUNS: u64 = 50;

/// The child: a status consumer and intake that abort at `KAIROS_CRASH_AT`.
#[tokio::test]
#[ignore = "run by the kill tests below"]
async fn child_intake_that_crashes() {
    let (Ok(db), Ok(nats_url)) = (
        std::env::var("KAIROS_TEST_DB_URL"),
        std::env::var("KAIROS_TEST_NATS_URL"),
    ) else {
        return;
    };
    let pool = PgPool::connect(&db).await.expect("child connects");
    let config = kairos_launcher::NatsConfig::new(nats_url);
    let launcher = kairos_launcher::NatsLauncher::connect(config)
        .await
        .expect("nats");
    let _intake = spawn_status_intake(&pool, &launcher).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    panic!("the crash point was not reached");
}

/// `RUNS` published runs, and `STARTED` + `SUCCESS` for each waiting in the status stream;
/// then a child process applies them until it aborts at `crash_at`.
async fn kill_child_at(
    crash_at: &str,
) -> (
    TestDb,
    kairos_testkit::NatsServer,
    kairos_launcher::NatsLauncher,
) {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "s", "allow", None).await;
    for n in 0..RUNS {
        run(&pool, &key(n), "s", -1.0).await;
    }
    sqlx::query("update schedule_runs set status = 'ENQUEUED', published_at = now()")
        .execute(&pool)
        .await
        .expect("publish");
    // The stream and its consumer exist before the reports go in.
    kairos_launcher::status::StatusConsumer::connect(&launcher, kairos_launcher::status::Lane::All)
        .await
        .expect("status stream");
    for n in 0..RUNS {
        for status in ["STARTED", "SUCCESS"] {
            let body = json!({"idempotency_key": key(n), "status": status, "executor_id": "e1"});
            publish_status(&launcher, "kairos", &key(n), &body)
                .await
                .expect("report stored");
        }
    }
    let base = std::env::var("KAIROS_TEST_DATABASE_URL").expect("KAIROS_TEST_DATABASE_URL");
    let (server_url, _) = base.rsplit_once('/').expect("url with a database");
    let database = pool
        .connect_options()
        .get_database()
        .expect("test db")
        .to_string();
    let status = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            test_name!("child_intake_that_crashes"),
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("KAIROS_CRASH_AT", crash_at)
        .env("KAIROS_TEST_DB_URL", format!("{server_url}/{database}"))
        .env("KAIROS_TEST_NATS_URL", server.url())
        .status()
        .expect("spawn child");
    assert!(!status.success(), "the child must die at the crash point");
    (db, server, launcher)
}

/// The messages the dead child held are delivered again at once: a new durable consumer
/// of the work-queue stream starts from the first message still stored (what the server
/// does by itself after the consumer's `ack_wait`).
async fn redeliver_now(launcher: &kairos_launcher::NatsLauncher) {
    let stream = launcher
        .jetstream()
        .get_stream(STATUS_STREAM)
        .await
        .expect("status stream");
    stream
        .delete_consumer(STATUS_CONSUMER)
        .await
        .expect("drop the dead consumer");
}

async fn successes(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from schedule_runs where status = 'SUCCESS'")
        .fetch_one(pool)
        .await
        .expect("count")
}

/// Finished attempts over every run, as each run's attempt history lists them.
async fn attempts(pool: &PgPool) -> i64 {
    let keys: Vec<String> = sqlx::query_scalar("select idempotency_key from schedule_runs")
        .fetch_all(pool)
        .await
        .expect("keys");
    let mut finished = 0;
    for key in keys {
        let history = kairos_store::attempts::history(pool, &key)
            .await
            .expect("history");
        finished += history.len() as i64;
    }
    finished
}

async fn finished(pool: &PgPool) -> Vec<(String, Option<chrono::DateTime<chrono::Utc>>)> {
    sqlx::query_as("select idempotency_key, finished_at from schedule_runs order by 1")
        .fetch_all(pool)
        .await
        .expect("runs")
}

#[tokio::test]
async fn killed_before_the_commit_the_batch_is_applied_once_by_the_next() {
    let (db, _server, launcher) = kill_child_at("intake_before_commit").await;
    let pool = db.pool();
    let statuses = dispatcher_support::statuses(&pool).await;
    assert!(
        statuses.values().all(|s| *s == RunStatus::Enqueued),
        "the killed batch recorded nothing: {statuses:?}"
    );
    assert_eq!(attempts(&pool).await, 0);

    redeliver_now(&launcher).await;
    let _intake = spawn_status_intake(&pool, &launcher).await;
    until(Duration::from_secs(20), "every run SUCCESS", || async {
        successes(&pool).await == RUNS as i64
    })
    .await;
    assert_eq!(
        attempts(&pool).await,
        RUNS as i64,
        "one finished attempt per run"
    );
}

#[tokio::test]
async fn killed_after_the_commit_the_redelivered_reports_change_nothing() {
    let (db, _server, launcher) = kill_child_at("intake_after_commit").await;
    let pool = db.pool();
    let before = finished(&pool).await;
    let applied = dispatcher_support::statuses(&pool)
        .await
        .values()
        .filter(|s| **s != RunStatus::Enqueued)
        .count();
    assert!(
        applied > 0,
        "the first batch was committed before the abort"
    );

    redeliver_now(&launcher).await;
    let _intake = spawn_status_intake(&pool, &launcher).await;
    until(Duration::from_secs(20), "every run SUCCESS", || async {
        successes(&pool).await == RUNS as i64
    })
    .await;
    let after = finished(&pool).await;
    for ((key, was), (_, now)) in before.iter().zip(&after) {
        if was.is_some() {
            assert_eq!(was, now, "{key}: a report applied again moved finished_at");
        }
    }
    assert_eq!(
        attempts(&pool).await,
        RUNS as i64,
        "one finished attempt per run"
    );
}
