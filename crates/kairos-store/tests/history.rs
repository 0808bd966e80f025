//! Run history on real PostgreSQL: the per-schedule statistics (`stats`) and retention
//! (`retention`), over runs put into known states.

use kairos_testkit::TestDb;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use kairos_core::{RunRef, RunStatus};
use kairos_store::retention::{self, RetentionRule};
use kairos_store::stats;
use sqlx::PgPool;

fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("rfc3339")
}

/// One run row as a test states it.
struct Row<'a> {
    schedule_id: &'a str,
    run_at: DateTime<Utc>,
    status: RunStatus,
    published: bool,
    reason: Option<&'a str>,
}

fn row(schedule_id: &str, run_at: DateTime<Utc>, status: RunStatus) -> Row<'_> {
    let published =
        status.in_flight() || matches!(status, RunStatus::Success | RunStatus::TimedOut);
    Row {
        schedule_id,
        run_at,
        status,
        published,
        reason: None,
    }
}

async fn insert(pool: &PgPool, rows: &[Row<'_>]) {
    for r in rows {
        sqlx::query(
            "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
               workflow_id, version, user_id, published_at, reason, created_at, updated_at) \
             values (encode(sha256(convert_to($1 || ':' || $2::text, 'UTF8')), 'hex'), $1, $2, \
               $2, $3, 'w', 1, 'u', case when $4 then $2 end, $5, $2, $2)",
        )
        .bind(r.schedule_id)
        .bind(r.run_at)
        .bind(r.status.as_str())
        .bind(r.published)
        .bind(r.reason)
        .execute(pool)
        .await
        .expect("insert run");
    }
}

async fn schedule(pool: &PgPool, schedule_id: &str, missed_ticks: i64, error: Option<&str>) {
    sqlx::query(
        "insert into schedules (schedule_id, workflow_id, version, user_id, cron_expr, \
           timezone, missed_ticks, planner_error) \
         values ($1, 'w', 1, 'u', '* * * * *', 'UTC', $2, $3)",
    )
    .bind(schedule_id)
    .bind(missed_ticks)
    .bind(error)
    .execute(pool)
    .await
    .expect("insert schedule");
}

async fn statuses(pool: &PgPool, schedule_id: &str) -> Vec<(DateTime<Utc>, RunStatus)> {
    let rows: Vec<(DateTime<Utc>, String)> = sqlx::query_as(
        "select run_at, status from schedule_runs where schedule_id = $1 order by run_at",
    )
    .bind(schedule_id)
    .fetch_all(pool)
    .await
    .expect("read runs");
    rows.into_iter()
        .map(|(at, status)| (at, status.parse().expect("a run status")))
        .collect()
}

#[tokio::test]
async fn stats_name_the_last_fire_and_why_the_last_tick_did_not_launch() {
    let db = TestDb::new().await;
    let pool = db.pool();
    schedule(&pool, "s1", 7, None).await;
    let t = |m: i64| at("2026-03-01T10:00:00Z") + Duration::minutes(m);
    let skipped = Row {
        reason: Some("overlap skip: run abc is in flight"),
        ..row("s1", t(2), RunStatus::Skipped)
    };
    let failed = Row {
        reason: Some("launch failed permanently: dag missing"),
        ..row("s1", t(3), RunStatus::Failed)
    };
    let executor_failed = Row {
        reason: Some("executor reported FAILED"),
        published: true,
        ..row("s1", t(5), RunStatus::Failed)
    };
    insert(
        &pool,
        &[
            row("s1", t(0), RunStatus::Success),
            row("s1", t(1), RunStatus::Skipped),
            skipped,
            failed,
            row("s1", t(4), RunStatus::Started),
            executor_failed,
            row("s1", t(6), RunStatus::Pending),
            row("other", t(9), RunStatus::Skipped),
        ],
    )
    .await;

    let got = stats::for_schedule(&pool, "s1", stats::DEFAULT_WINDOW)
        .await
        .expect("stats");
    assert_eq!(
        got.last_fire,
        Some(RunRef {
            run_at: t(5),
            status: RunStatus::Failed,
            reason: Some("executor reported FAILED".into()),
            last_error: None,
        }),
        "an executor-reported failure was launched"
    );
    let missed = got
        .last_not_launched
        .as_ref()
        .expect("a tick did not launch");
    assert_eq!((missed.run_at, missed.status), (t(3), RunStatus::Failed));
    assert_eq!(
        got.why().as_deref(),
        Some("FAILED: launch failed permanently: dag missing")
    );
    assert_eq!(got.missed_ticks, 7);
    assert_eq!(
        got.skipped_ticks, 2,
        "the other schedule's skip is not counted"
    );
    assert_eq!(got.runs_examined, 7);
    assert_eq!(got.planner_error, None);

    // The window bounds every run-derived answer: the newest three runs only.
    let narrow = stats::for_schedule(&pool, "s1", 3).await.expect("stats");
    assert_eq!(narrow.runs_examined, 3);
    assert_eq!(narrow.skipped_ticks, 0);
    assert_eq!(narrow.last_not_launched, None);
    assert_eq!(narrow.last_fire.map(|r| r.run_at), Some(t(5)));
}

#[tokio::test]
async fn a_parked_schedule_says_why_and_a_deleted_one_keeps_its_run_stats() {
    let db = TestDb::new().await;
    let pool = db.pool();
    schedule(&pool, "parked", 0, Some("cron_expr: no longer parses")).await;
    insert(
        &pool,
        &[row(
            "parked",
            at("2026-03-01T10:00:00Z"),
            RunStatus::Success,
        )],
    )
    .await;
    let parked = stats::for_schedule(&pool, "parked", 10)
        .await
        .expect("stats");
    assert_eq!(
        parked.why().as_deref(),
        Some("planner_error: cron_expr: no longer parses")
    );

    // No schedules row (deleted): run stats still answer, missed_ticks is 0.
    insert(
        &pool,
        &[row("gone", at("2026-03-01T10:00:00Z"), RunStatus::Success)],
    )
    .await;
    let gone = stats::for_schedule(&pool, "gone", 10).await.expect("stats");
    assert_eq!(gone.missed_ticks, 0);
    assert_eq!(gone.runs_examined, 1);
    assert_eq!(gone.why(), None);

    let empty = stats::for_schedule(&pool, "nothing", 10)
        .await
        .expect("stats");
    assert_eq!((empty.runs_examined, empty.last_fire), (0, None));
}

/// Retention rule "older than 30 days before `now`, keep the newest `keep_last`".
fn rule(now: DateTime<Utc>, keep_last: u32, limit: u32) -> RetentionRule {
    RetentionRule {
        older_than: now - Duration::days(30),
        keep_last,
        limit,
    }
}

#[tokio::test]
async fn retention_deletes_old_terminal_runs_beyond_keep_last_in_bounded_batches() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let now = at("2026-06-01T00:00:00Z");
    let old = |day: i64| now - Duration::days(100 - day);
    let terminal = [
        RunStatus::Success,
        RunStatus::Failed,
        RunStatus::TimedOut,
        RunStatus::Skipped,
        RunStatus::Cancelled,
    ];
    // Schedule a: 10 old terminal runs, then 2 recent ones.
    let mut rows: Vec<Row> = (0..10)
        .map(|i| row("a", old(i), terminal[i as usize % 5]))
        .collect();
    rows.push(row("a", now - Duration::days(1), RunStatus::Success));
    rows.push(row("a", now - Duration::hours(1), RunStatus::Success));
    // Schedule b: old runs that are not finished, which retention never touches.
    for (i, status) in [
        RunStatus::Pending,
        RunStatus::Queued,
        RunStatus::Enqueued,
        RunStatus::Started,
    ]
    .into_iter()
    .enumerate()
    {
        rows.push(row("b", old(i as i64), status));
    }
    // A deleted schedule's history (no schedules row): same rule.
    rows.extend((0..6).map(|i| row("gone", old(i), RunStatus::Success)));
    insert(&pool, &rows).await;

    // keep_last 5: a keeps its 2 recent + 3 newest old; gone keeps 5 of 6.
    let first = retention::delete_batch(&pool, &rule(now, 5, 4))
        .await
        .expect("batch");
    assert_eq!(first, 4, "a batch deletes at most its limit");
    let mut total = first;
    loop {
        let n = retention::delete_batch(&pool, &rule(now, 5, 4))
            .await
            .expect("batch");
        assert!(n <= 4);
        total += n;
        if n < 4 {
            break;
        }
    }
    assert_eq!(total, 7 + 1);

    let a = statuses(&pool, "a").await;
    let kept: Vec<DateTime<Utc>> = a.iter().map(|(run_at, _)| *run_at).collect();
    assert_eq!(
        kept,
        vec![
            old(7),
            old(8),
            old(9),
            now - Duration::days(1),
            now - Duration::hours(1)
        ]
    );
    assert_eq!(statuses(&pool, "b").await.len(), 4, "in-flight rows stay");
    assert_eq!(statuses(&pool, "gone").await.len(), 5);

    // keep_last 0: every old terminal run goes, recent and in-flight ones stay.
    while retention::delete_batch(&pool, &rule(now, 0, 100))
        .await
        .expect("batch")
        > 0
    {}
    assert_eq!(statuses(&pool, "a").await.len(), 2);
    assert_eq!(statuses(&pool, "b").await.len(), 4);
    assert_eq!(statuses(&pool, "gone").await.len(), 0);
}

#[tokio::test]
async fn retention_skips_a_locked_row_instead_of_waiting() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let now = at("2026-06-01T00:00:00Z");
    let old = now - Duration::days(90);
    insert(
        &pool,
        &[
            row("a", old, RunStatus::Success),
            row("a", old + Duration::hours(1), RunStatus::Success),
        ],
    )
    .await;
    // A status callback holds the older row (the intake locks `for update`).
    let mut holder = pool.begin().await.expect("begin");
    sqlx::query("select 1 from schedule_runs where run_at = $1 for update")
        .bind(old)
        .execute(&mut *holder)
        .await
        .expect("lock");
    let deleted = tokio::time::timeout(
        StdDuration::from_secs(5),
        retention::delete_batch(&pool, &rule(now, 0, 10)),
    )
    .await
    .expect("retention does not wait for the lock")
    .expect("batch");
    assert_eq!(deleted, 1);
    holder.rollback().await.expect("rollback");
    let left = statuses(&pool, "a").await;
    assert_eq!(left, vec![(old, RunStatus::Success)]);
}
