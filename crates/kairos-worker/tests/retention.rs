//! The retention loop on real PostgreSQL: passes are bounded by `max_batches`, age is
//! measured with the database's (pinned) now, unfinished runs stay, and `run` stops on
//! shutdown.

use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use kairos_core::RunStatus;
use kairos_store::PgPool;
use kairos_worker::retention::{PassReport, Retention, RetentionConfig};

fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("rfc3339")
}

const NOW: &str = "2026-06-01T00:00:00Z";

fn config(batch_size: u32, max_batches: u32) -> RetentionConfig {
    RetentionConfig {
        retention: Duration::days(30),
        keep_last: 2,
        batch_size,
        max_batches,
        batch_pause: StdDuration::ZERO,
        interval: StdDuration::from_secs(3600),
        partition_days_ahead: 2,
        pinned_now: Some(at(NOW)),
        audit_retention: Duration::days(365),
    }
}

/// `n` runs of `schedule_id`, one a day ending `days_ago` days before NOW, all `status`.
async fn runs(pool: &PgPool, schedule_id: &str, n: i64, days_ago: i64, status: RunStatus) {
    for i in 0..n {
        let run_at = at(NOW) - Duration::days(days_ago + i);
        sqlx::query(
            "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
               workflow_id, version, user_id, created_at, updated_at) \
             values (encode(sha256(convert_to($1 || ':' || $2::text, 'UTF8')), 'hex'), $1, $2, \
               $2, $3, 'w', 1, 'u', $2, $2)",
        )
        .bind(schedule_id)
        .bind(run_at)
        .bind(status.as_str())
        .execute(pool)
        .await
        .expect("insert run");
    }
}

async fn count(pool: &PgPool, schedule_id: &str) -> i64 {
    sqlx::query_scalar("select count(*) from schedule_runs where schedule_id = $1")
        .bind(schedule_id)
        .fetch_one(pool)
        .await
        .expect("count")
}

#[tokio::test]
async fn a_pass_is_bounded_and_the_next_one_finishes() {
    let db = TestDb::new().await;
    let pool = db.pool();
    // 10 old finished runs, 5 recent ones, 4 old unfinished ones on another schedule.
    runs(&pool, "a", 10, 40, RunStatus::Success).await;
    runs(&pool, "a", 5, 0, RunStatus::Success).await;
    runs(&pool, "b", 2, 40, RunStatus::Started).await;
    runs(&pool, "b", 2, 50, RunStatus::Pending).await;
    let retention = Retention::new(pool.clone(), config(3, 2));

    let first = retention.pass().await.expect("pass");
    assert_eq!(
        first,
        PassReport {
            now: at(NOW),
            batches: 2,
            deleted: 6,
            days_dropped: 0,
            dropped: 0,
            more: true,
            changes_deleted: 0,
        }
    );
    // keep_last 2 is already met by the recent runs: all 10 old ones go.
    let second = retention.pass().await.expect("pass");
    assert_eq!((second.deleted, second.more), (4, false));
    let third = retention.pass().await.expect("pass");
    assert_eq!((third.batches, third.deleted), (1, 0));
    assert_eq!(count(&pool, "a").await, 5);
    assert_eq!(
        count(&pool, "b").await,
        4,
        "unfinished runs are never deleted"
    );
}

#[tokio::test]
async fn run_deletes_then_stops_on_shutdown() {
    let db = TestDb::new().await;
    let pool = db.pool();
    runs(&pool, "a", 4, 40, RunStatus::Skipped).await;
    let retention = Retention::new(pool.clone(), config(100, 10));
    let (stop, stopping) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        retention
            .run(async {
                let _ = stopping.await;
            })
            .await
    });
    // The first pass runs at once; the loop then sleeps for `interval` (an hour).
    for _ in 0..100 {
        if count(&pool, "a").await == 2 {
            break;
        }
        tokio::time::sleep(StdDuration::from_millis(20)).await;
    }
    assert_eq!(count(&pool, "a").await, 2, "the newest keep_last stay");
    stop.send(()).expect("send stop");
    tokio::time::timeout(StdDuration::from_secs(5), task)
        .await
        .expect("stops promptly")
        .expect("task")
        .expect("run");
}

#[tokio::test]
async fn a_pass_makes_the_days_ahead_and_drops_an_old_day_whole() {
    let db = TestDb::new().await;
    let pool = db.pool();
    // A day's partition 60 days back, holding 3 finished runs of `c`; `c` has 2 newer runs
    // (keep_last 2), in the default partition.
    kairos_store::partitions::create_ahead(&pool, at(NOW) - Duration::days(60), 0)
        .await
        .expect("old day");
    for hour in [1, 2, 3] {
        let run_at = at(NOW) - Duration::days(60) + Duration::hours(hour);
        sqlx::query(
            "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
               workflow_id, version, user_id, created_at, updated_at) \
             values (encode(sha256(convert_to('c:' || $1::text, 'UTF8')), 'hex'), 'c', $1, \
               $1, 'SUCCESS', 'w', 1, 'u', $1, $1)",
        )
        .bind(run_at)
        .execute(&pool)
        .await
        .expect("old run");
    }
    runs(&pool, "c", 2, 3, RunStatus::Success).await;
    let retention = Retention::new(pool.clone(), config(100, 10));
    let report = retention.pass().await.expect("pass");
    assert_eq!(
        (report.days_dropped, report.dropped, report.deleted),
        (1, 3, 0)
    );
    assert_eq!(count(&pool, "c").await, 2);
    let days: Vec<String> = kairos_store::partitions::list(&pool)
        .await
        .expect("list")
        .into_iter()
        .map(|p| p.day.to_string())
        .filter(|d| d.as_str() < "2026-07-01")
        .collect();
    assert_eq!(days, ["2026-06-01", "2026-06-02", "2026-06-03"]);
}

/// A change of schedule `schedule_id` recorded `days_ago` days before NOW.
async fn change(pool: &PgPool, schedule_id: &str, days_ago: i64) {
    let change = kairos_core::Change {
        subject: kairos_core::Subject::schedule(schedule_id, "w"),
        kind: kairos_core::ChangeKind::Update,
        actor: kairos_core::Actor::new("compiler", Some(format!("r-{days_ago}"))),
        note: None,
        fields: vec![kairos_core::FieldChange::new("priority", 0, 1)],
    };
    let mut conn = pool.acquire().await.expect("connection");
    kairos_store::history::record(&mut conn, &change, at(NOW) - Duration::days(days_ago))
        .await
        .expect("record");
}

#[tokio::test]
async fn a_pass_deletes_the_changes_older_than_the_audit_retention_only() {
    let db = TestDb::new().await;
    let pool = db.pool();
    for days_ago in [400, 366, 364, 10, 0] {
        change(&pool, "a", days_ago).await;
    }
    // Batches of 1: the pass goes on until every old change is gone.
    let retention = Retention::new(pool.clone(), config(1, 10));
    let report = retention.pass().await.expect("pass");
    assert_eq!(report.changes_deleted, 2);
    let kept: Vec<String> = sqlx::query_scalar("select request_id from change_history order by at")
        .fetch_all(&pool)
        .await
        .expect("kept");
    assert_eq!(kept, ["r-364", "r-10", "r-0"]);
    let again = retention.pass().await.expect("pass");
    assert_eq!(again.changes_deleted, 0);
}
