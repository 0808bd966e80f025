//! The sweeps that run every second on every instance find their few runs without scanning
//! every run in flight, even behind statistics taken before a burst was published.
//!
//! The situation: today's partition was analysed while its runs were `PENDING` (as at the
//! start of a minute), then all of them were published. The planner believes almost no run
//! is in flight, so any index whose predicate the statement proves looks like one row. A
//! statement that writes `status = 'CANCELLING'` or `status = 'ENQUEUED'` proves the
//! predicate of `schedule_runs_in_flight` too, and the planner chose that index: a scan of
//! every run in flight to find one or none. Each test counts the blocks of today's in-flight
//! index that the sweeps read.

use crate::support;

use chrono::{DateTime, TimeDelta, Utc};
use kairos_store::{attempts, cancel};
use kairos_testkit::TestDb;
use sqlx::PgPool;
use support::{key_of, now, runs, schedules};

/// Runs of schedules `s1`..`s<n>` at `tick`, analysed while `PENDING`, then all `ENQUEUED`
/// (published at `tick`).
async fn published_behind_stale_statistics(pool: &PgPool, n: i64, tick: DateTime<Utc>) {
    schedules(pool, n).await;
    runs(pool, n, tick, "PENDING").await;
    sqlx::query("analyze schedule_runs")
        .execute(pool)
        .await
        .expect("analyze");
    sqlx::query("update schedule_runs set status = 'ENQUEUED', published_at = run_at")
        .execute(pool)
        .await
        .expect("published");
}

/// The in-flight index of the partition that holds `key`.
async fn in_flight_index_of(pool: &PgPool, key: &str) -> String {
    sqlx::query_scalar(
        "select i.inhrelid::regclass::text from pg_inherits i \
         where i.inhparent = 'schedule_runs_in_flight'::regclass \
           and i.inhrelid::regclass::text in ( \
             select indexname::text from pg_indexes where tablename = ( \
               select p.tableoid::regclass::text from schedule_runs p \
               where p.idempotency_key = $1))",
    )
    .bind(key)
    .fetch_one(pool)
    .await
    .expect("the partition's in-flight index")
}

/// Blocks of `index` this backend has read and not yet flushed to the statistics. A
/// backend flushes its counts only between transactions (at most once a second), so a test
/// reads this before and after the statements it measures, inside one transaction.
async fn blocks_read(tx: &mut sqlx::PgConnection, index: &str) -> i64 {
    sqlx::query_scalar("select pg_stat_get_xact_blocks_fetched($1::regclass)")
        .bind(index)
        .fetch_one(tx)
        .await
        .expect("blocks read")
}

/// Planning a statement reads the index's metapage; a scan of it reads every page (about a
/// hundred here, and 17,000 under a burst).
const PLANNING_ONLY: i64 = 4;

#[tokio::test]
async fn the_cancel_sweeps_do_not_scan_the_in_flight_index() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let tick = now();
    published_behind_stale_statistics(&pool, 20_000, tick).await;
    let key = key_of(&pool, "s1").await;
    let mut conn = pool.acquire().await.expect("connection");
    cancel::request(&mut conn, &key, "test", None)
        .await
        .expect("cancel");
    drop(conn);
    let in_flight = in_flight_index_of(&pool, &key).await;

    let mut tx = pool.begin().await.expect("begin");
    let before = blocks_read(&mut tx, &in_flight).await;
    let found = cancel::unsent(&mut tx, 10).await.expect("unsent");
    assert_eq!(found.len(), 1);
    let timed_out = cancel::time_out(&mut tx, tick, 60.0)
        .await
        .expect("time out");
    assert!(timed_out.is_empty(), "{timed_out:?}");
    let fetched = blocks_read(&mut tx, &in_flight).await - before;
    tx.rollback().await.expect("rollback");
    assert!(
        fetched <= PLANNING_ONLY,
        "{in_flight}: {fetched} blocks read by the cancel sweeps"
    );
}

#[tokio::test]
async fn the_start_timeout_sweep_does_not_scan_the_in_flight_index() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let tick = now();
    published_behind_stale_statistics(&pool, 20_000, tick).await;
    // One run was published ten minutes ago and never started.
    let key = key_of(&pool, "s1").await;
    sqlx::query("update schedule_runs set published_at = $2 where idempotency_key = $1")
        .bind(&key)
        .bind(tick - TimeDelta::minutes(10))
        .execute(&pool)
        .await
        .expect("published earlier");
    let in_flight = in_flight_index_of(&pool, &key).await;

    let mut tx = pool.begin().await.expect("begin");
    let before = blocks_read(&mut tx, &in_flight).await;
    let found = attempts::unstarted(&mut tx, tick, 60, 500)
        .await
        .expect("unstarted");
    let fetched = blocks_read(&mut tx, &in_flight).await - before;
    tx.rollback().await.expect("rollback");
    let found: Vec<&str> = found
        .iter()
        .map(|u| u.run.idempotency_key.as_str())
        .collect();
    assert_eq!(found, [key.as_str()], "only the run past its start timeout");
    assert!(
        fetched <= PLANNING_ONLY,
        "{in_flight}: {fetched} blocks read by the start time-out sweep"
    );
}

#[tokio::test]
async fn the_probe_counts_a_scan_of_the_in_flight_index() {
    let db = TestDb::new().await;
    let pool = db.pool();
    published_behind_stale_statistics(&pool, 20_000, now()).await;
    let in_flight = in_flight_index_of(&pool, &key_of(&pool, "s1").await).await;

    let mut tx = pool.begin().await.expect("begin");
    let before = blocks_read(&mut tx, &in_flight).await;
    sqlx::query("set local enable_seqscan = off")
        .execute(&mut *tx)
        .await
        .expect("set");
    let _: i64 = sqlx::query_scalar(
        "select count(*) from schedule_runs \
         where status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING') and schedule_id > ''",
    )
    .fetch_one(&mut *tx)
    .await
    .expect("scan");
    let fetched = blocks_read(&mut tx, &in_flight).await - before;
    tx.rollback().await.expect("rollback");
    assert!(
        fetched > PLANNING_ONLY,
        "{in_flight}: only {fetched} blocks read by a scan"
    );
}
