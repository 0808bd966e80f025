//! The cancel outbox (`run_cancels`) holds exactly the `CANCELLING` runs, kept by a trigger
//! as runs enter and leave that status, and the two cancel sweeps find their runs there:
//! with thousands of runs in flight behind statistics taken before they were, a sweep does
//! not scan the in-flight index.

mod support;

use chrono::{DurationRound, TimeDelta, Utc};
use kairos_store::cancel::{self, Cancel};
use kairos_testkit::TestDb;
use sqlx::PgPool;
use support::{key_of, schedules, stored_run};

/// `n` runs of schedules `s1`..`sn` at `run_at`, in `status`.
async fn runs(pool: &PgPool, n: i64, run_at: chrono::DateTime<Utc>, status: &str) {
    sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
           workflow_id, version, user_id, published_at) \
         select encode(sha256(convert_to('s' || i || $2::text, 'UTF8')), 'hex'), 's' || i, \
           $2, $2, $3, 'w', 1, 'u', case when $3 = 'ENQUEUED' then $2 end \
         from generate_series(1, $1::int8) as i",
    )
    .bind(n)
    .bind(run_at)
    .bind(status)
    .execute(pool)
    .await
    .expect("runs");
}

/// The outbox, as (key, sent).
async fn outbox(pool: &PgPool) -> Vec<(String, bool)> {
    sqlx::query_as(
        "select idempotency_key, sent_at is not null from run_cancels order by idempotency_key",
    )
    .fetch_all(pool)
    .await
    .expect("outbox")
}

/// Blocks of `index` this backend has read and not yet flushed to the statistics.
async fn blocks_read(tx: &mut sqlx::PgConnection, index: &str) -> i64 {
    sqlx::query_scalar("select pg_stat_get_xact_blocks_fetched($1::regclass)")
        .bind(index)
        .fetch_one(tx)
        .await
        .expect("blocks read")
}

fn now() -> chrono::DateTime<Utc> {
    Utc::now()
        .duration_trunc(TimeDelta::seconds(1))
        .expect("whole second")
}

#[tokio::test]
async fn the_outbox_holds_exactly_the_cancelling_runs() {
    let db = TestDb::new().await;
    let pool = db.pool();
    schedules(&pool, 4).await;
    for schedule in ["s1", "s2", "s3", "s4"] {
        stored_run(&pool, schedule, now(), "ENQUEUED").await;
    }
    let [k1, k2, k3, k4] = [
        key_of(&pool, "s1").await,
        key_of(&pool, "s2").await,
        key_of(&pool, "s3").await,
        key_of(&pool, "s4").await,
    ];
    let mut conn = pool.acquire().await.expect("connection");
    for key in [&k1, &k2, &k3, &k4] {
        let done = cancel::request(&mut conn, key, "test", None)
            .await
            .expect("cancel");
        assert!(matches!(done, Cancel::Cancelling(_)), "{done:?}");
    }
    let mut expected: Vec<(String, bool)> = [&k1, &k2, &k3, &k4].map(|k| (k.clone(), false)).into();
    expected.sort();
    assert_eq!(outbox(&pool).await, expected);

    // Sent: the outbox says so, and the next sweep does not send it again.
    let mut tx = pool.begin().await.expect("begin");
    let unsent = cancel::unsent(&mut tx, 10).await.expect("unsent");
    assert_eq!(unsent.len(), 4);
    cancel::mark_sent(&mut tx, std::slice::from_ref(&k1), now())
        .await
        .expect("sent");
    tx.commit().await.expect("commit");
    let mut tx = pool.begin().await.expect("begin");
    let unsent: Vec<String> = cancel::unsent(&mut tx, 10)
        .await
        .expect("unsent")
        .into_iter()
        .map(|run| run.idempotency_key)
        .collect();
    tx.rollback().await.expect("rollback");
    assert!(!unsent.contains(&k1) && unsent.len() == 3, "{unsent:?}");
    assert!(outbox(&pool).await.contains(&(k1.clone(), true)));

    // A run leaves CANCELLING by a report, by the time-out, or by being deleted.
    sqlx::query("update schedule_runs set status = 'CANCELLED' where idempotency_key = $1")
        .bind(&k2)
        .execute(&pool)
        .await
        .expect("reported");
    sqlx::query("delete from schedule_runs where idempotency_key = $1")
        .bind(&k3)
        .execute(&pool)
        .await
        .expect("deleted");
    let mut tx = pool.begin().await.expect("begin");
    let timed_out = cancel::time_out(&mut tx, now() + TimeDelta::hours(1), 60.0)
        .await
        .expect("time out");
    tx.commit().await.expect("commit");
    let mut rest = vec![k1.clone(), k4.clone()];
    rest.sort();
    let mut timed_out_sorted = timed_out.clone();
    timed_out_sorted.sort();
    assert_eq!(timed_out_sorted, rest, "the two still CANCELLING time out");
    assert_eq!(outbox(&pool).await, Vec::new());
}

#[tokio::test]
async fn sweeps_do_not_scan_the_in_flight_index() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let n = 20_000;
    schedules(&pool, n).await;
    let tick = now();
    // Statistics taken while none of today's runs is in flight, as at the start of a minute.
    runs(&pool, n, tick, "PENDING").await;
    sqlx::query("analyze schedule_runs")
        .execute(&pool)
        .await
        .expect("analyze");
    sqlx::query("update schedule_runs set status = 'ENQUEUED', published_at = run_at")
        .execute(&pool)
        .await
        .expect("published");
    let key = key_of(&pool, "s1").await;
    let mut conn = pool.acquire().await.expect("connection");
    cancel::request(&mut conn, &key, "test", None)
        .await
        .expect("cancel");
    drop(conn);
    let in_flight: String = sqlx::query_scalar(
        "select i.inhrelid::regclass::text from pg_inherits i \
         where i.inhparent = 'schedule_runs_in_flight'::regclass \
           and i.inhrelid::regclass::text in ( \
             select indexname::text from pg_indexes where tablename = ( \
               select p.tableoid::regclass::text from schedule_runs p \
               where p.idempotency_key = $1))",
    )
    .bind(&key)
    .fetch_one(&pool)
    .await
    .expect("today's in-flight index");

    // Blocks of the index read by the sweeps: counted before and after them in one
    // transaction, because the backend's counts are flushed only between transactions and
    // may still hold this connection's earlier statements (the update above reads about
    // 40,000 blocks of it).
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
    // Planning each statement reads the index's metapage; a scan of it reads every page
    // (about a hundred here, and 17,000 under a burst).
    assert!(
        fetched <= 4,
        "{in_flight}: {fetched} blocks read by the cancel sweeps"
    );

    // The probe can fail: a statement that does scan the index is counted.
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
    assert!(fetched > 0, "the probe saw no read of {in_flight}");
}
