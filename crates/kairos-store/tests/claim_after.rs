//! A claim that starts after a point in time (`ClaimScope::after`): it takes only the runs
//! due after it, still highest priority first across every priority a schedule has had
//! (`run_priorities`, kept by triggers on `schedules`), and reads the claim index from that
//! point on.

use crate::support;

use chrono::{DateTime, TimeDelta, Utc};
use kairos_store::dispatch::{claim, ClaimScope};
use kairos_testkit::TestDb;
use sqlx::PgPool;
use support::{now, schedules, stored_run};

/// The schedules of the runs a claim at `at` takes, in the claim's order.
async fn claimed(pool: &PgPool, at: DateTime<Utc>, after: Option<DateTime<Utc>>) -> Vec<String> {
    let scope = ClaimScope {
        after,
        ..ClaimScope::default()
    };
    let mut tx = pool.begin().await.expect("begin");
    let runs = claim(&mut tx, at, at, 300.0, 100, &scope)
        .await
        .expect("claim");
    tx.rollback().await.expect("rollback");
    runs.into_iter().map(|run| run.schedule_id).collect()
}

async fn execute(pool: &PgPool, sql: &str) {
    sqlx::query(sql).execute(pool).await.expect(sql);
}

#[tokio::test]
async fn a_claim_after_a_time_takes_the_runs_due_after_it_in_priority_order() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let now = now();
    let ago = |s: i64| now - TimeDelta::seconds(s);
    schedules(&pool, 4).await;
    // s3's priority changes through its schedule: the trigger notes 7 in run_priorities.
    execute(
        &pool,
        "update schedules set priority = 7 where schedule_id = 's3'",
    )
    .await;
    stored_run(&pool, "s1", ago(10), "PENDING").await;
    stored_run(&pool, "s2", ago(3), "PENDING").await;
    stored_run(&pool, "s3", ago(2), "PENDING").await;
    stored_run(&pool, "s4", ago(1), "RETRYING").await;
    execute(
        &pool,
        "update schedule_runs set priority = 7 where schedule_id = 's3'",
    )
    .await;

    assert_eq!(claimed(&pool, now, None).await, ["s3", "s1", "s2", "s4"]);
    assert_eq!(
        claimed(&pool, now, Some(ago(5))).await,
        ["s3", "s2", "s4"],
        "s1, due before the point, is left to a claim from the oldest due run"
    );
    assert_eq!(
        claimed(&pool, now, Some(ago(2))).await,
        ["s4"],
        "strictly after the point"
    );
    let priorities: Vec<i32> =
        sqlx::query_scalar("select priority from run_priorities order by priority")
            .fetch_all(&pool)
            .await
            .expect("priorities");
    assert_eq!(priorities, [0, 7]);
}

#[tokio::test]
async fn a_run_whose_priority_no_schedule_has_had_waits_for_a_claim_from_the_oldest() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let now = now();
    schedules(&pool, 1).await;
    stored_run(&pool, "s1", now - TimeDelta::seconds(1), "PENDING").await;
    execute(&pool, "update schedule_runs set priority = 9").await;

    assert!(claimed(&pool, now, Some(now - TimeDelta::seconds(5)))
        .await
        .is_empty());
    assert_eq!(claimed(&pool, now, None).await, ["s1"]);
}

#[tokio::test]
async fn a_schedule_written_with_a_priority_notes_it_once() {
    let db = TestDb::new().await;
    let pool = db.pool();
    schedules(&pool, 2).await;
    execute(&pool, "update schedules set priority = -3").await;
    execute(&pool, "update schedules set priority = -3").await;
    execute(
        &pool,
        "insert into schedules (schedule_id, workflow_id, version, user_id, cron_expr, \
           timezone, priority) values ('s9', 'w', 1, 'u', '* * * * *', 'UTC', 12)",
    )
    .await;
    let priorities: Vec<i32> =
        sqlx::query_scalar("select priority from run_priorities order by priority")
            .fetch_all(&pool)
            .await
            .expect("priorities");
    assert_eq!(priorities, [-3, 0, 12]);
}
