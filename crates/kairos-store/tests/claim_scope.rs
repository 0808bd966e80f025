//! Which due runs a claim takes (`dispatch::claim` with a `ClaimScope`): an instance in a
//! region takes its own region's runs and those without a region at once, another region's
//! only once they are past due by `others_after`, and never those recorded for a region
//! that is not ready. And how long a silent round keeps what it claimed
//! (`dispatch::bound_idle`): PostgreSQL ends its session after that long idle in its
//! transaction, and another claim takes the runs.

use crate::support;

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use kairos_store::dispatch::{bound_idle, claim, ClaimScope};
use kairos_testkit::TestDb;
use sqlx::PgPool;
use support::{key_of, now, schedules, stored_run};

/// Schedules `s1`..`s5`: s1 and s2 in `eu`, s3 in `us`, s4 without a region, s5 in `us`.
async fn regions(pool: &PgPool) {
    schedules(pool, 5).await;
    sqlx::query(
        "update schedules set region = case schedule_id \
           when 's1' then 'eu' when 's2' then 'eu' when 's3' then 'us' when 's5' then 'us' end",
    )
    .execute(pool)
    .await
    .expect("regions");
}

async fn claimed(pool: &PgPool, at: DateTime<Utc>, scope: &ClaimScope) -> HashSet<String> {
    let mut tx = pool.begin().await.expect("begin");
    let runs = claim(&mut tx, at, at, 300.0, 100, scope)
        .await
        .expect("claim");
    tx.rollback().await.expect("rollback");
    runs.into_iter().map(|run| run.schedule_id).collect()
}

fn set(names: &[&str]) -> HashSet<String> {
    names.iter().map(|name| (*name).to_string()).collect()
}

#[tokio::test]
async fn an_instance_claims_its_own_region_and_no_region_at_once_and_others_once_past_due() {
    let db = TestDb::new().await;
    let pool = db.pool();
    regions(&pool).await;
    let at = now();
    for schedule in ["s1", "s2", "s3", "s4"] {
        stored_run(&pool, schedule, at, "PENDING").await;
    }
    // Another region's run 10 s past due: its own instances have not taken it.
    stored_run(&pool, "s5", at - TimeDelta::seconds(10), "PENDING").await;
    // s2's launch was recorded for `us` (a fallback): it counts as a `us` run.
    sqlx::query("update schedule_runs set launch_region = 'us' where schedule_id = 's2'")
        .execute(&pool)
        .await
        .expect("launch region");

    let in_eu = ClaimScope {
        unavailable: Vec::new(),
        region: Some("eu".to_string()),
        others_after: Duration::from_secs(3),
        after: None,
    };
    assert_eq!(claimed(&pool, at, &in_eu).await, set(&["s1", "s4", "s5"]));

    let in_us = ClaimScope {
        region: Some("us".to_string()),
        ..in_eu.clone()
    };
    assert_eq!(
        claimed(&pool, at, &in_us).await,
        set(&["s2", "s3", "s4", "s5"])
    );

    // Five seconds on, every run is past due by more than three: every instance takes all.
    let later = at + TimeDelta::seconds(5);
    assert_eq!(
        claimed(&pool, later, &in_eu).await,
        set(&["s1", "s2", "s3", "s4", "s5"])
    );

    // No region: every due run, as without regions.
    let anywhere = ClaimScope::default();
    assert_eq!(
        claimed(&pool, at, &anywhere).await,
        set(&["s1", "s2", "s3", "s4", "s5"])
    );

    // A run recorded for a region that is not ready is left alone, whoever claims.
    let us_down = ClaimScope {
        unavailable: vec!["us".to_string()],
        ..anywhere
    };
    assert_eq!(
        claimed(&pool, at, &us_down).await,
        set(&["s1", "s3", "s4", "s5"])
    );
}

#[tokio::test]
async fn a_silent_round_frees_its_claimed_runs_after_its_idle_bound() {
    let db = TestDb::new().await;
    let pool = db.pool();
    schedules(&pool, 1).await;
    let at = now();
    stored_run(&pool, "s1", at, "PENDING").await;
    let key = key_of(&pool, "s1").await;
    let scope = ClaimScope::default();

    let mut silent = pool.begin().await.expect("begin");
    bound_idle(&mut silent, Duration::from_millis(1000))
        .await
        .expect("bound");
    let held = claim(&mut silent, at, at, 300.0, 10, &scope)
        .await
        .expect("claim");
    assert_eq!(held.len(), 1);

    // While the round holds it, another claim walks past it.
    let mut other = pool.begin().await.expect("begin");
    let none = claim(&mut other, at, at, 300.0, 10, &scope)
        .await
        .expect("claim");
    assert!(none.is_empty(), "held by the silent round: {none:?}");
    other.rollback().await.expect("rollback");

    // The silent round says nothing for longer than its bound: PostgreSQL ends its session.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let mut other = pool.begin().await.expect("begin");
    let taken = claim(&mut other, at, at, 300.0, 10, &scope)
        .await
        .expect("claim");
    assert_eq!(
        taken
            .iter()
            .map(|run| run.idempotency_key.clone())
            .collect::<Vec<_>>(),
        vec![key],
        "the run is free again"
    );
    other.rollback().await.expect("rollback");
    let next = sqlx::query("select 1").execute(&mut *silent).await;
    assert!(next.is_err(), "the silent round's session was ended");

    // The bound is the transaction's own: the connection's next one has the session's.
    let mut conn = pool.acquire().await.expect("connection");
    let before = idle_timeout(&mut conn).await;
    sqlx::query("begin")
        .execute(&mut *conn)
        .await
        .expect("begin");
    bound_idle(&mut conn, Duration::from_millis(1234))
        .await
        .expect("bound");
    assert_eq!(idle_timeout(&mut conn).await, "1234ms");
    sqlx::query("commit")
        .execute(&mut *conn)
        .await
        .expect("commit");
    assert_eq!(idle_timeout(&mut conn).await, before);
}

async fn idle_timeout(conn: &mut sqlx::PgConnection) -> String {
    sqlx::query_scalar("show idle_in_transaction_session_timeout")
        .fetch_one(conn)
        .await
        .expect("show")
}
