//! What the database itself enforces on `schedule_runs` and `schedules`, whatever the caller:
//! one row per key (invariant 1), whole-second ticks, known statuses, window order.

use chrono::{DateTime, Duration, Utc};
use kairos_core::{RunSource, RunStatus};
use kairos_store::runs::{self, NewRun};
use sqlx::PgPool;

fn run(key: &str, run_at: DateTime<Utc>, status: RunStatus) -> NewRun {
    NewRun {
        idempotency_key: key.to_string(),
        schedule_id: "s".into(),
        run_at,
        fire_at: run_at,
        status,
        source: RunSource::Schedule,
        overlap: None,
        workflow_id: "w".into(),
        version: 1,
        user_id: "u".into(),
    }
}

fn at() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-09T12:00:00Z")
        .expect("time")
        .with_timezone(&Utc)
}

#[sqlx::test(migrator = "kairos_store::MIGRATOR")]
async fn one_row_per_key_and_only_valid_rows(pool: PgPool) {
    let key = "a".repeat(64);
    assert!(
        runs::insert(&pool, &run(&key, at(), RunStatus::Pending), at())
            .await
            .expect("first")
    );
    assert!(
        !runs::insert(&pool, &run(&key, at(), RunStatus::Pending), at())
            .await
            .expect("duplicate")
    );
    assert_eq!(runs::count(&pool).await.expect("count"), 1);
    let fraction = run(
        &"b".repeat(64),
        at() + Duration::milliseconds(500),
        RunStatus::Pending,
    );
    assert!(
        runs::insert(&pool, &fraction, at()).await.is_err(),
        "run_at must be whole seconds"
    );
    let unknown_status = sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
         workflow_id, version, user_id) values ($1, 's', $2, $2, 'DONE', 'w', 1, 'u')",
    )
    .bind("c".repeat(64))
    .bind(at())
    .execute(&pool)
    .await;
    assert!(unknown_status.is_err(), "only the statuses of RunStatus");
    assert!(
        runs::insert(&pool, &run("not-hex", at(), RunStatus::Pending), at())
            .await
            .is_err()
    );
    let backwards = sqlx::query(
        "insert into schedules (schedule_id, workflow_id, version, user_id, cron_expr, timezone, \
         start_at, end_at) values ('s', 'w', 1, 'u', '@daily', 'UTC', $1, $2)",
    )
    .bind(at())
    .bind(at() - Duration::days(1))
    .execute(&pool)
    .await;
    assert!(
        backwards.is_err(),
        "end_at before start_at is refused by the table too"
    );
}
