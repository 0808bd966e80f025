//! A run's attempt history: the attempts `run_attempts` keeps, and a `SUCCESS` attempt read
//! from the run row itself (the status intake writes no `run_attempts` row for it).

use chrono::{DateTime, Utc};
use kairos_core::RunStatus;
use kairos_store::attempts;
use kairos_testkit::TestDb;
use sqlx::PgPool;

fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("rfc3339")
}

/// A run at attempt `attempt` in `status`, finished at `finished` when given.
async fn run(pool: &PgPool, key: &str, status: &str, attempt: i32, finished: Option<&str>) {
    let run_at = at("2030-01-01T10:00:00Z");
    sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
           attempt, executor_id, run_id, published_at, started_at, finished_at, workflow_id, \
           version, user_id, created_at, updated_at, last_error) \
         values ($1, 's', $2, $2, $3, $4, 'e2', 'x2', $2, $2, $5, 'w', 1, 'u', $2, $2, \
           'exit 3')",
    )
    .bind(key)
    .bind(run_at)
    .bind(status)
    .bind(attempt)
    .bind(finished.map(at))
    .execute(pool)
    .await
    .expect("insert run");
}

async fn attempt_row(pool: &PgPool, key: &str, attempt: i32, status: &str, finished: &str) {
    sqlx::query(
        "insert into run_attempts (idempotency_key, attempt, status, error, executor_id, \
           finished_at) values ($1, $2, $3, $4, 'e1', $5)",
    )
    .bind(key)
    .bind(attempt)
    .bind(status)
    .bind((status == "FAILED").then_some("exit 3"))
    .bind(at(finished))
    .execute(pool)
    .await
    .expect("insert attempt");
}

#[tokio::test]
async fn a_success_after_a_failed_attempt_lists_both_in_order_from_two_places() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let key = "a".repeat(64);
    run(&pool, &key, "SUCCESS", 2, Some("2030-01-01T10:05:00Z")).await;
    attempt_row(&pool, &key, 1, "FAILED", "2030-01-01T10:01:00Z").await;

    let history = attempts::history(&pool, &key).await.expect("history");
    let listed: Vec<(i32, RunStatus, Option<&str>, Option<&str>)> = history
        .iter()
        .map(|a| {
            (
                a.attempt,
                a.status,
                a.error.as_deref(),
                a.executor_id.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            (1, RunStatus::Failed, Some("exit 3"), Some("e1")),
            // The run row's last_error belongs to the failed attempt, not to this one.
            (2, RunStatus::Success, None, Some("e2")),
        ]
    );
    assert_eq!(history[1].finished_at, at("2030-01-01T10:05:00Z"));
    assert_eq!(history[1].run_id.as_deref(), Some("x2"));
}

#[tokio::test]
async fn a_success_row_written_to_run_attempts_before_is_listed_once() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let key = "b".repeat(64);
    run(&pool, &key, "SUCCESS", 1, Some("2030-01-01T10:05:00Z")).await;
    attempt_row(&pool, &key, 1, "SUCCESS", "2030-01-01T10:05:00Z").await;

    let history = attempts::history(&pool, &key).await.expect("history");
    assert_eq!(history.len(), 1, "{history:?}");
    assert_eq!(
        history[0].executor_id.as_deref(),
        Some("e1"),
        "the run_attempts row is the one listed"
    );
}

#[tokio::test]
async fn a_run_not_finished_in_success_lists_only_what_run_attempts_keeps() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let started = "c".repeat(64);
    run(&pool, &started, "STARTED", 2, None).await;
    attempt_row(&pool, &started, 1, "FAILED", "2030-01-01T10:01:00Z").await;
    let failed = "d".repeat(64);
    run(&pool, &failed, "FAILED", 1, Some("2030-01-01T10:02:00Z")).await;

    let history = attempts::history(&pool, &started).await.expect("history");
    assert_eq!(
        history.iter().map(|a| a.attempt).collect::<Vec<_>>(),
        [1],
        "the attempt in progress is not a finished one"
    );
    let history = attempts::history(&pool, &failed).await.expect("history");
    assert!(
        history.is_empty(),
        "a FAILED run's attempt is listed from run_attempts alone: {history:?}"
    );
}
