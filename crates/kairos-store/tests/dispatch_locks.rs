//! The dispatch lock of exclusive schedules (`dispatch::lock_schedules`): one transaction
//! at a time holds a schedule's, another is never made to wait for it, it ends with its
//! transaction, and a burst of any size fits (a row lock per schedule, not PostgreSQL's
//! shared lock table, which the advisory locks it replaces overflowed). Ahead of a
//! pre-staged wave (`dispatch::lock_ahead`), only a clear schedule is taken: one whose
//! earlier run still waits, or with a run in flight or queued, is left for the tick, so
//! nothing that may go out meanwhile is held back behind the wave.

use crate::support;

use kairos_testkit::TestDb;
use std::collections::HashSet;

use chrono::{DurationRound, TimeDelta, Utc};
use kairos_store::dispatch::{lock_ahead, lock_schedules};
use support::{schedules, stored_run};

fn ids(names: &[&str]) -> Vec<String> {
    names.iter().map(|name| (*name).to_string()).collect()
}

fn set(names: &[&str]) -> HashSet<String> {
    names.iter().map(|name| (*name).to_string()).collect()
}

#[tokio::test]
async fn a_schedule_is_held_by_one_transaction_until_it_ends() {
    let db = TestDb::new().await;
    let pool = db.pool();
    schedules(&pool, 3).await;
    let mut first = pool.begin().await.expect("begin");
    let mut second = pool.begin().await.expect("begin");
    let held = lock_schedules(&mut first, &ids(&["s1", "s2"]))
        .await
        .expect("lock");
    assert_eq!(held, set(&["s1", "s2"]));
    // Taken again by its holder (a later wave of the same round): still held.
    let again = lock_schedules(&mut first, &ids(&["s2"]))
        .await
        .expect("lock");
    assert_eq!(again, set(&["s2"]));
    let other = lock_schedules(&mut second, &ids(&["s2", "s3"]))
        .await
        .expect("does not wait");
    assert_eq!(other, set(&["s3"]), "s2 is held by the first transaction");

    first.rollback().await.expect("end");
    let after = lock_schedules(&mut second, &ids(&["s1", "s2"]))
        .await
        .expect("lock");
    assert_eq!(after, set(&["s1", "s2"]), "released with its transaction");
}

#[tokio::test]
async fn a_schedule_without_a_lock_row_is_still_held_by_one_transaction() {
    let db = TestDb::new().await;
    let pool = db.pool();
    // A schedule id the table has no row for (written by hand): the advisory fallback.
    let mut first = pool.begin().await.expect("begin");
    let mut second = pool.begin().await.expect("begin");
    let held = lock_schedules(&mut first, &ids(&["nowhere"]))
        .await
        .expect("lock");
    assert_eq!(held, set(&["nowhere"]));
    let other = lock_schedules(&mut second, &ids(&["nowhere"]))
        .await
        .expect("does not wait");
    assert!(other.is_empty());
}

#[tokio::test]
async fn a_deleted_and_recreated_schedule_keeps_one_lock_row() {
    let db = TestDb::new().await;
    let pool = db.pool();
    schedules(&pool, 1).await;
    sqlx::query("delete from schedules where schedule_id = 's1'")
        .execute(&pool)
        .await
        .expect("delete");
    schedules(&pool, 1).await;
    let rows: i64 =
        sqlx::query_scalar("select count(*) from schedule_dispatch_locks where schedule_id = 's1'")
            .fetch_one(&pool)
            .await
            .expect("count");
    assert_eq!(rows, 1);
}

/// 30,000 exclusive schedules locked by one transaction, 60,000 by two: far past the
/// shared lock table of a server with default settings (64 × (100 + 0) slots and some
/// slack), which advisory locks overflowed with "out of shared memory".
#[tokio::test]
async fn a_burst_of_any_size_fits() {
    let db = TestDb::new().await;
    let pool = db.pool();
    schedules(&pool, 60_000).await;
    let all: Vec<String> = (1..=60_000).map(|i| format!("s{i}")).collect();
    let mut first = pool.begin().await.expect("begin");
    let mut second = pool.begin().await.expect("begin");
    let held = lock_schedules(&mut first, &all[..30_000])
        .await
        .expect("30,000 locks in one transaction");
    assert_eq!(held.len(), 30_000);
    let held = lock_schedules(&mut second, &all)
        .await
        .expect("30,000 more in another");
    assert_eq!(held.len(), 30_000, "the first transaction's are skipped");
    assert!(held.iter().all(|id| all[30_000..].contains(id)));
}

#[tokio::test]
async fn ahead_of_a_wave_only_clear_schedules_are_locked_the_rest_at_the_tick() {
    let db = TestDb::new().await;
    let pool = db.pool();
    schedules(&pool, 8).await;
    let first = Utc::now()
        .duration_trunc(TimeDelta::seconds(1))
        .expect("whole seconds")
        + TimeDelta::seconds(5);
    let second = TimeDelta::seconds(1);
    // s2 has a run due a second before the wave (another round holds it, or nobody has
    // claimed it yet); s3 one after it; s4 one at the same moment (another round's); s5 a
    // run in flight; s6 a queued one. s7's earlier run has waited an hour (for its region,
    // say), with runs of s8 finished since: it still counts.
    stored_run(&pool, "s7", first - second * 3600, "PENDING").await;
    for minutes in 1..=50 {
        stored_run(&pool, "s8", first - second * 60 * minutes, "SUCCESS").await;
    }
    stored_run(&pool, "s2", first - second, "PENDING").await;
    stored_run(&pool, "s3", first + second, "PENDING").await;
    stored_run(&pool, "s4", first, "PENDING").await;
    stored_run(&pool, "s5", first - second * 60, "STARTED").await;
    stored_run(&pool, "s6", first - second * 2, "QUEUED").await;
    let all = ids(&["s1", "s2", "s3", "s4", "s5", "s6", "s7"]);
    let mut round = pool.begin().await.expect("begin");
    let held = lock_ahead(&mut round, &all, first)
        .await
        .expect("lock ahead");
    assert_eq!(held, set(&["s1", "s3", "s4"]));

    // Held as at the tick: another round gets only the others.
    let mut other = pool.begin().await.expect("begin");
    let got = lock_schedules(&mut other, &all)
        .await
        .expect("does not wait");
    assert_eq!(got, set(&["s2", "s5", "s6", "s7"]));
    // And what another round holds is skipped ahead, never waited for.
    let mut third = pool.begin().await.expect("begin");
    let ahead = lock_ahead(&mut third, &ids(&["s1", "s3"]), first)
        .await
        .expect("does not wait");
    assert!(ahead.is_empty(), "held ahead by the first round: {ahead:?}");
}
