//! Run deadlines on real PostgreSQL (and a real nats-server behind the sweepers), with the
//! database clock pinned: the planner gives each tick of a schedule with `deadline_s` its
//! deadline; the sweep marks late, once, every run not `SUCCESS` by it (unfinished, ended
//! after it, skipped, failed, never launched), never one that succeeded in time nor one
//! without a deadline; two sweepers racing mark a run once; the counter and the overdue
//! gauge say the same.

use crate::dispatcher_support;
use crate::planner_support;

use chrono::{DateTime, Utc};
use kairos_core::RunKey;
use kairos_launcher::NatsLauncher;
use kairos_store::{deadlines, runs, PgPool};
use kairos_testkit::prometheus::sample;
use kairos_testkit::{sqlx, TestDb};
use kairos_worker::metrics as m;
use kairos_worker::sweep::Sweeper;
use planner_support::{drain, input, other_pool, planner, ts, upsert};

/// The schedules are written a minute before the 05:00 tick, planned at it.
const WRITTEN: &str = "2026-03-01T04:59:00Z";
const TICK: &str = "2026-03-01T05:00:00Z";

/// An hourly schedule `id` with `deadline_s`, its 05:00 tick planned; the tick's key.
async fn planned(pool: &PgPool, id: &str, deadline_s: Option<i64>) -> String {
    let mut schedule = input(id, "0 * * * *");
    schedule.deadline_s = deadline_s;
    upsert(pool, WRITTEN, schedule).await;
    drain(&planner(pool, TICK)).await;
    let key = RunKey::tick(id, ts(TICK)).as_str().to_string();
    let run = runs::get(pool, &key).await.expect("read").expect("planned");
    let expected = deadline_s.map(|s| ts(TICK) + chrono::Duration::seconds(s));
    assert_eq!(run.deadline_at, expected, "{id}: the tick's deadline");
    key
}

/// Sets a run's status (and when it started and ended) as the intake or dispatcher would.
async fn set(pool: &PgPool, key: &str, status: &str, finished_at: Option<&str>) {
    sqlx::query(
        "update schedule_runs set status = $2, finished_at = $3::timestamptz, \
           published_at = case when $2 in ('STARTED', 'SUCCESS', 'FAILED') \
             then run_at end, \
           started_at = case when $2 in ('STARTED', 'SUCCESS', 'FAILED') then run_at end, \
           reason = case when $2 = 'SKIPPED' then 'overlap: a run was in flight' end \
         where idempotency_key = $1",
    )
    .bind(key)
    .bind(status)
    .bind(finished_at)
    .execute(pool)
    .await
    .expect("set status");
}

async fn sweeper(pool: &PgPool, launcher: &NatsLauncher) -> Sweeper<NatsLauncher> {
    dispatcher_support::sweeper(pool, launcher)
}

async fn late(pool: &PgPool, key: &str) -> (Option<DateTime<Utc>>, Option<String>) {
    let run = runs::get(pool, key).await.expect("read").expect("run");
    (run.late_at, run.late_reason)
}

fn counter(text: &str, name: &str) -> f64 {
    sample(text, name, &[]).unwrap_or_else(|| panic!("{name} missing in:\n{text}"))
}

#[tokio::test]
async fn an_unfinished_run_is_late_once_however_many_sweepers_race() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let recorder = m::recorder();
    let handle = recorder.handle();
    let _local = metrics::set_default_local_recorder(&recorder);
    m::zero();
    let (_server, launcher) = dispatcher_support::nats().await;
    let key = planned(&pool, "a", Some(600)).await;
    set(&pool, &key, "STARTED", None).await;
    let one = sweeper(&pool, &launcher).await;
    let second_pool = other_pool(&pool).await;
    let two = sweeper(&second_pool, &launcher).await;

    // Before the deadline (05:10) nothing is late, and nothing is overdue.
    let marked = one.mark_late(Some(ts("2026-03-01T05:09:59Z"))).await;
    assert_eq!(marked.expect("sweep"), 0);
    assert_eq!(late(&pool, &key).await, (None, None));
    assert_eq!(counter(&handle.render(), m::RUNS_OVERDUE), 0.0);

    // Two instances sweep at once past it: the run is marked once.
    let at = ts("2026-03-01T05:11:00Z");
    let (a, b) = tokio::join!(one.mark_late(Some(at)), two.mark_late(Some(at)));
    assert_eq!(a.expect("sweep one") + b.expect("sweep two"), 1);
    let (late_at, reason) = late(&pool, &key).await;
    assert_eq!(late_at, Some(at));
    let reason = reason.expect("a reason");
    assert!(
        reason.contains("STARTED and not final at its deadline 2026-03-01T05:10:00Z"),
        "{reason}"
    );
    // Later sweeps leave the mark alone and count nothing more.
    let later = ts("2026-03-01T05:30:00Z");
    assert_eq!(one.mark_late(Some(later)).await.expect("sweep"), 0);
    assert_eq!(two.mark_late(Some(later)).await.expect("sweep"), 0);
    assert_eq!(late(&pool, &key).await.0, Some(at), "marked once");
    let text = handle.render();
    assert_eq!(counter(&text, m::RUNS_LATE), 1.0, "{text}");
    assert_eq!(counter(&text, m::RUNS_OVERDUE), 1.0, "{text}");
    assert_eq!(deadlines::overdue(&pool, later).await.expect("overdue"), 1);

    // The run is never stopped; once it ends, it is no longer overdue, and still late.
    let run = runs::get(&pool, &key).await.expect("read").expect("run");
    assert_eq!(
        run.status.as_str(),
        "STARTED",
        "late is a mark, not a status"
    );
    set(&pool, &key, "SUCCESS", Some("2026-03-01T05:40:00Z")).await;
    let end = ts("2026-03-01T05:41:00Z");
    assert_eq!(one.mark_late(Some(end)).await.expect("sweep"), 0);
    let open: bool = sqlx::query_scalar("select deadline_open from schedule_runs")
        .fetch_one(&pool)
        .await
        .expect("read");
    assert!(!open, "a late run that ended leaves the sweep's index");
    let text = handle.render();
    assert_eq!(counter(&text, m::RUNS_OVERDUE), 0.0, "{text}");
    assert_eq!(counter(&text, m::RUNS_LATE), 1.0, "{text}");
    assert_eq!(late(&pool, &key).await.0, Some(at), "still late");
}

#[tokio::test]
async fn only_a_success_by_the_deadline_is_on_time() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let recorder = m::recorder();
    let handle = recorder.handle();
    let _local = metrics::set_default_local_recorder(&recorder);
    m::zero();
    let (_server, launcher) = dispatcher_support::nats().await;
    // Every deadline is 05:10.
    let in_time = planned(&pool, "in-time", Some(600)).await;
    let success_after = planned(&pool, "success-after", Some(600)).await;
    let failed_after = planned(&pool, "failed-after", Some(600)).await;
    let failed_before = planned(&pool, "failed-before", Some(600)).await;
    let skipped = planned(&pool, "skipped", Some(600)).await;
    let never_launched = planned(&pool, "never-launched", Some(600)).await;
    let no_deadline = planned(&pool, "no-deadline", None).await;
    set(&pool, &in_time, "SUCCESS", Some("2026-03-01T05:09:00Z")).await;
    // Both ended after the deadline before any sweep saw them.
    set(
        &pool,
        &success_after,
        "SUCCESS",
        Some("2026-03-01T05:15:00Z"),
    )
    .await;
    set(&pool, &failed_after, "FAILED", Some("2026-03-01T05:12:00Z")).await;
    set(
        &pool,
        &failed_before,
        "FAILED",
        Some("2026-03-01T05:03:00Z"),
    )
    .await;
    set(&pool, &skipped, "SKIPPED", Some("2026-03-01T05:00:00Z")).await;
    set(&pool, &no_deadline, "STARTED", None).await;
    let sweeper = sweeper(&pool, &launcher).await;

    // Before the deadline, even the skipped tick and the failed run are not late yet.
    let early = sweeper.mark_late(Some(ts("2026-03-01T05:05:00Z"))).await;
    assert_eq!(early.expect("sweep"), 0);
    let at = ts("2026-03-01T05:20:00Z");
    assert_eq!(sweeper.mark_late(Some(at)).await.expect("sweep"), 5);
    assert_eq!(late(&pool, &in_time).await, (None, None), "success in time");
    assert_eq!(late(&pool, &no_deadline).await, (None, None), "no deadline");
    let reason = |key: String| {
        let pool = pool.clone();
        async move {
            let (late_at, reason) = late(&pool, &key).await;
            assert_eq!(late_at, Some(at), "{key}");
            reason.expect("a reason")
        }
    };
    assert_eq!(
        reason(success_after).await,
        "ended SUCCESS at 2026-03-01T05:15:00Z, 00:05:00 after its deadline \
         2026-03-01T05:10:00Z"
    );
    assert!(reason(failed_after)
        .await
        .starts_with("ended FAILED at 2026-03-01T05:12:00Z"));
    assert_eq!(
        reason(failed_before).await,
        "ended FAILED at 2026-03-01T05:03:00Z: not SUCCESS by its deadline 2026-03-01T05:10:00Z"
    );
    assert_eq!(
        reason(skipped).await,
        "ended SKIPPED at 2026-03-01T05:00:00Z (overlap: a run was in flight): not SUCCESS \
         by its deadline 2026-03-01T05:10:00Z"
    );
    assert!(reason(never_launched)
        .await
        .starts_with("PENDING and not final at its deadline"));

    // Much later, the run without a deadline is still not late, and nothing is counted twice.
    let much_later = ts("2026-03-02T05:00:00Z");
    assert_eq!(sweeper.mark_late(Some(much_later)).await.expect("sweep"), 0);
    assert_eq!(late(&pool, &no_deadline).await, (None, None));
    let text = handle.render();
    assert_eq!(counter(&text, m::RUNS_LATE), 5.0, "{text}");
    // Only the never-launched tick is past its deadline and not final.
    assert_eq!(counter(&text, m::RUNS_OVERDUE), 1.0, "{text}");
    let open: Vec<String> =
        sqlx::query_scalar("select schedule_id from schedule_runs where deadline_open order by 1")
            .fetch_all(&pool)
            .await
            .expect("read");
    assert_eq!(
        open,
        ["never-launched"],
        "judged runs leave the sweep's index"
    );
}

#[tokio::test]
async fn a_backfill_has_no_deadline() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let mut schedule = input("b", "0 * * * *");
    schedule.deadline_s = Some(60);
    upsert(&pool, WRITTEN, schedule).await;
    let registrar = planner_support::registrar(&pool, TICK);
    let done = registrar
        .backfill(
            "b",
            ts("2026-03-01T01:00:00Z"),
            ts("2026-03-01T02:00:00Z"),
            None,
        )
        .await
        .expect("backfill");
    assert_eq!(done.created, 2);
    let deadlines: Vec<Option<DateTime<Utc>>> =
        sqlx::query_scalar("select deadline_at from schedule_runs where schedule_id = 'b'")
            .fetch_all(&pool)
            .await
            .expect("read");
    assert_eq!(deadlines, [None, None], "ticks planned after the fact");
}
