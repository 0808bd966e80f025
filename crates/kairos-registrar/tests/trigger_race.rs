//! Bug: trigger-now read back the run it found by key and `expect`ed it, but history
//! retention may delete that (finished) run between the insert and the read: the request
//! panicked. It is now a conflict the caller can act on. The race is made certain here with
//! a statement trigger that holds the request between its insert and its read.

use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use std::time::Duration;

use chrono::{DateTime, Utc};
use kairos_core::RunKey;
use kairos_registrar::{Error, Registrar, ScheduleInput, Settings};

fn ts(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("time")
        .with_timezone(&Utc)
}

#[tokio::test]
async fn a_run_deleted_by_retention_during_trigger_is_a_conflict_not_a_panic() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let registrar = Registrar::new(
        pool.clone(),
        Settings {
            pinned_now: Some(ts("2026-03-09T12:00:00Z")),
            ..Settings::default()
        },
    );
    let input = ScheduleInput {
        schedule_id: Some("s1".into()),
        workflow_id: "wf".into(),
        version: 1,
        user_id: "u1".into(),
        cron_expr: "0 * * * *".into(),
        timezone: "UTC".into(),
        ..ScheduleInput::default()
    };
    registrar.upsert(&input).await.expect("upsert");
    let first = registrar
        .trigger("s1", "r1", None)
        .await
        .expect("first trigger");
    assert!(first.created);
    sqlx::query("update schedule_runs set status = 'SUCCESS' where source = 'manual'")
        .execute(&pool)
        .await
        .expect("finish the run");
    // Every insert statement on schedule_runs now pauses 1 s after it ran (a conflict
    // included), which is when retention deletes the finished run below.
    sqlx::raw_sql(
        "create function hold() returns trigger language plpgsql as \
           $$ begin perform pg_sleep(1); return null; end $$; \
         create trigger hold after insert on schedule_runs \
           for each statement execute function hold();",
    )
    .execute(&pool)
    .await
    .expect("install the hold");
    let key = RunKey::manual("s1", "r1").as_str().to_string();
    let retention = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        sqlx::query("delete from schedule_runs where idempotency_key = $1")
            .bind(&key)
            .execute(&pool)
            .await
            .expect("retention deletes the run")
            .rows_affected()
    };
    let (again, deleted) = tokio::join!(registrar.trigger("s1", "r1", None), retention);
    assert_eq!(deleted, 1, "the run was deleted while the trigger held");
    assert!(
        matches!(again, Err(Error::Conflict { ref detail }) if detail.contains("retention")),
        "{again:?}"
    );
}
