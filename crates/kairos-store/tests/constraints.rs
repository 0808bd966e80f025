//! What the database itself enforces on `schedule_runs` and `schedules`, whatever the caller:
//! one row per key (invariant "one row per tick"), whole-second ticks, known statuses,
//! window order.

use chrono::{DateTime, Duration, Utc};
use kairos_core::{RunSource, RunStatus};
use kairos_store::runs::{self, NewRun};
use kairos_testkit::TestDb;

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

#[tokio::test]
async fn one_row_per_key_and_only_valid_rows() {
    let db = TestDb::new().await;
    let pool = db.pool();
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

/// The constraint a refused statement named, if it was a check violation.
fn violated_check(res: Result<sqlx::postgres::PgQueryResult, sqlx::Error>) -> Option<String> {
    match res {
        Err(sqlx::Error::Database(err)) if err.code().as_deref() == Some("23514") => {
            err.constraint().map(str::to_string)
        }
        _ => None,
    }
}

#[tokio::test]
async fn a_key_of_the_wrong_shape_is_refused_whenever_it_is_written() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let key_check = Some("schedule_runs_idempotency_key_check".to_string());
    let insert = |key: &str, source: &str| {
        sqlx::query(
            "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
             source, workflow_id, version, user_id) \
             values ($1, 's', $2, $2, 'PENDING', $3, 'w', 1, 'u')",
        )
        .bind(key.to_string())
        .bind(at())
        .bind(source.to_string())
    };
    let hex = "d".repeat(64);
    for (key, source) in [
        ("not-hex", "schedule"),
        (hex.as_str(), "api"),
        ("a b", "api"),
    ] {
        let res = insert(key, source).execute(&pool).await;
        assert_eq!(violated_check(res), key_check, "{key:?} as {source}");
    }
    insert(&hex, "schedule").execute(&pool).await.expect("hex");
    insert("caller-key_1", "api")
        .execute(&pool)
        .await
        .expect("api");
    // An update that writes the key or the source is checked like an insert.
    for update in [
        "update schedule_runs set idempotency_key = 'NOT-HEX' where source = 'schedule'",
        "update schedule_runs set source = 'api' where source = 'schedule'",
        "update schedule_runs set source = 'manual' where source = 'api'",
    ] {
        let res = sqlx::query(update).execute(&pool).await;
        assert_eq!(violated_check(res), key_check, "{update}");
    }
    // A status change leaves the key alone and is not checked again.
    let moved = sqlx::query("update schedule_runs set status = 'ENQUEUED'")
        .execute(&pool)
        .await
        .expect("status change");
    assert_eq!(moved.rows_affected(), 2);
}
