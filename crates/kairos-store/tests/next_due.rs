//! `dispatch::next_due_in`: how long until the next run waiting for its launch, and `None`
//! when no run waits at all. An idle dispatcher sleeps on this answer; a "due now" with
//! nothing due made it claim every few milliseconds.

use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use kairos_store::dispatch::next_due_in;
use kairos_testkit::TestDb;
use sqlx::PgPool;

async fn run(pool: &PgPool, schedule: &str, fire_at: DateTime<Utc>, status: &str) {
    sqlx::query(
        "insert into schedules (schedule_id, workflow_id, version, user_id, cron_expr, \
           timezone) values ($1, 'w', 1, 'u', '* * * * *', 'UTC') on conflict do nothing",
    )
    .bind(schedule)
    .execute(pool)
    .await
    .expect("schedule");
    sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
           workflow_id, version, user_id) \
         values (encode(sha256(convert_to($1 || $2::text, 'UTF8')), 'hex'), $1, $2, $2, \
           $3, 'w', 1, 'u')",
    )
    .bind(schedule)
    .bind(fire_at)
    .bind(status)
    .execute(pool)
    .await
    .expect("run");
}

#[tokio::test]
async fn nothing_waiting_is_none_not_due_now() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let now = Utc::now()
        .duration_trunc(TimeDelta::seconds(1))
        .expect("whole second");
    assert_eq!(
        next_due_in(&pool, Some(now), None).await.expect("read"),
        None
    );

    // A run already published is not waiting; nor is one due before `after`.
    run(&pool, "s1", now + TimeDelta::seconds(30), "ENQUEUED").await;
    run(&pool, "s2", now + TimeDelta::seconds(10), "PENDING").await;
    assert_eq!(
        next_due_in(&pool, Some(now), Some(now + TimeDelta::seconds(20)))
            .await
            .expect("read"),
        None,
        "no run waits past `after`"
    );

    assert_eq!(
        next_due_in(&pool, Some(now), None).await.expect("read"),
        Some(Duration::from_secs(10))
    );
    // One already due is due now, never a negative wait.
    run(&pool, "s3", now - TimeDelta::seconds(5), "RETRYING").await;
    assert_eq!(
        next_due_in(&pool, Some(now), None).await.expect("read"),
        Some(Duration::ZERO)
    );
}
