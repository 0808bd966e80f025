//! Regression tests named after bugs other schedulers shipped with `@every` schedules
//! (`conformance/matrix.toml` lists them): downtime under each catch-up policy, and drift.
//! The planner runs on the real PostgreSQL with a pinned database "now", so minutes of
//! schedule time pass without waiting.

use crate::planner_support;

use chrono::{DateTime, Duration, Utc};
use kairos_store::PgPool;
use kairos_testkit::TestDb;
use kairos_worker::planner::Planner;
use planner_support::*;

/// The runs of `schedule_id` as (run_at, fire_at), oldest tick first.
async fn times(pool: &PgPool, schedule_id: &str) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    runs_of(pool, schedule_id)
        .await
        .into_iter()
        .map(|r| (r.run_at, r.fire_at))
        .collect()
}

/// `@every 15s` created at T, planned once (60 s ahead), then five minutes with no planner;
/// then passes at `back`. Answers the schedule's ticks: planned first, missed (older than
/// the grace), and due now or within the lookahead.
async fn every_15s_after_downtime(pool: &PgPool, catchup: &str) -> [Vec<DateTime<Utc>>; 3] {
    let created = "2026-03-09T10:00:00Z";
    let back = ts(created) + Duration::seconds(60 + 300);
    let mut schedule = input("every15", "@every 15s");
    schedule.catchup_policy = Some(catchup.into());
    upsert(pool, created, schedule).await;
    drain(&planner(pool, created)).await;
    let timetable = timetable("@every 15s", "UTC", ts(created));
    let first = ticks(&timetable, ts(created), ts(created) + Duration::seconds(60));
    let planner = Planner::new(pool.clone(), config(Some(back)));
    drain(&planner).await;
    assert_eq!(
        planner.pass().await.expect("pass").inserted,
        0,
        "again: nothing"
    );
    let grace = back - Duration::seconds(60);
    let missed: Vec<_> = ticks(&timetable, first[first.len() - 1], grace)
        .into_iter()
        .filter(|t| *t > first[first.len() - 1] && *t < grace)
        .collect();
    let due = ticks(&timetable, grace, back + Duration::seconds(60));
    assert_eq!((first.len(), missed.len(), due.len()), (5, 15, 9));
    [first, missed, due]
}

/// nats-server#7687: after downtime an `@every` fired twice. `@every 15s` after five
/// minutes without a planner, catch-up `none`: the 15 ticks older than the grace are
/// counted as missed and not fired; every other tick is one run, on its own time.
#[tokio::test]
async fn nats_7687_every_15s_after_downtime_catchup_none_fires_no_missed_tick() {
    let db = TestDb::new().await;
    let pool = &db.pool();
    let [first, missed, due] = every_15s_after_downtime(pool, "none").await;
    let runs = times(pool, "every15").await;
    let expected: Vec<_> = first.iter().chain(&due).map(|t| (*t, *t)).collect();
    assert_eq!(runs, expected);
    let (count, _) = kairos_store::planning::planner_stats(pool, "every15")
        .await
        .expect("stats")
        .expect("row");
    assert_eq!(count, missed.len() as i64, "missed ticks are counted");
}

/// nats-server#7687, catch-up `fire_immediately`: each of the 15 missed ticks is one run,
/// fired at the instant the planner came back; the others fire on their own time.
#[tokio::test]
async fn nats_7687_every_15s_after_downtime_fire_immediately_fires_each_missed_tick_once() {
    let db = TestDb::new().await;
    let pool = &db.pool();
    let [first, missed, due] = every_15s_after_downtime(pool, "fire_immediately").await;
    let back = due[0] + Duration::seconds(60);
    let runs = times(pool, "every15").await;
    let expected: Vec<_> = first
        .iter()
        .map(|t| (*t, *t))
        .chain(missed.iter().map(|t| (*t, back)))
        .chain(due.iter().map(|t| (*t, *t)))
        .collect();
    assert_eq!(runs, expected);
}

/// nats-server#7687, catch-up `spread`: each of the 15 missed ticks is one run, their fire
/// times spread in order across the lookahead after the planner came back.
#[tokio::test]
async fn nats_7687_every_15s_after_downtime_spread_spreads_each_missed_tick_once() {
    let db = TestDb::new().await;
    let pool = &db.pool();
    let [first, missed, due] = every_15s_after_downtime(pool, "spread").await;
    let back = due[0] + Duration::seconds(60);
    let runs = times(pool, "every15").await;
    let run_ats: Vec<_> = runs.iter().map(|(run_at, _)| *run_at).collect();
    let all: Vec<_> = first.iter().chain(&missed).chain(&due).copied().collect();
    assert_eq!(run_ats, all, "one run per tick");
    let spread: Vec<DateTime<Utc>> = runs
        .iter()
        .filter(|(run_at, _)| missed.contains(run_at))
        .map(|(_, fire_at)| *fire_at)
        .collect();
    assert!(
        spread
            .iter()
            .all(|f| *f >= back && *f <= back + Duration::seconds(60)),
        "{spread:?}"
    );
    assert!(spread.windows(2).all(|w| w[0] < w[1]), "{spread:?}");
}

/// nats-server#8308: sub-second and one-second intervals drifted. `@every 1s` planned by a
/// pass every 10 s for ten minutes of database time: 601 ticks, the n-th exactly n seconds
/// after the anchor, each fired at its tick (jitter 0). Nothing accumulates: each tick is
/// computed from the one before it, not from the instant of the pass.
#[tokio::test]
async fn nats_8308_every_1s_over_ten_minutes_does_not_drift() {
    let db = TestDb::new().await;
    let pool = &db.pool();
    let anchor = ts("2026-03-09T10:00:00Z");
    upsert(pool, "2026-03-09T10:00:00Z", input("every1", "@every 1s")).await;
    for pass in 0..=60 {
        // Passes late by a few hundred milliseconds, as a real loop is.
        let now = anchor + Duration::seconds(10 * pass) + Duration::milliseconds(137 * (pass % 7));
        drain(&Planner::new(pool.clone(), config(Some(now)))).await;
    }
    let runs: Vec<_> = times(pool, "every1")
        .await
        .into_iter()
        .filter(|(run_at, _)| *run_at <= anchor + Duration::seconds(600))
        .collect();
    assert_eq!(runs.len(), 601);
    for (n, (run_at, fire_at)) in runs.iter().enumerate() {
        let exact = anchor + Duration::seconds(n as i64);
        assert_eq!((*run_at, *fire_at), (exact, exact), "tick {n}");
    }
}
