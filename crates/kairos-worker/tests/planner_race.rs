//! Planners racing on the same schedules, and a planner process killed between claim and
//! commit: every tick ends up in `schedule_runs` exactly once (invariants "one row per tick"
//! and "claims die with their holder").

use crate::planner_support;

use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration as StdDuration, Instant};

use chrono::{DateTime, Duration, Utc};
use kairos_store::PgPool;
use kairos_worker::planner::Planner;
use planner_support::*;

/// (spec, zone) of schedule `i % 4`: seconds-level cron in three zones and an `@every`.
const SPECS: [(&str, &str); 4] = [
    ("* * * * * *", "UTC"),
    ("*/7 * * * * *", "Europe/Berlin"),
    ("*/10 * * * * *", "America/New_York"),
    ("@every 13s", "UTC"),
];
const SCHEDULES: usize = 300;

fn t0() -> DateTime<Utc> {
    ts("2026-03-29T00:59:00Z") // Berlin springs forward at 01:00 UTC on this day.
}

/// The keys every schedule must have once planned up to `horizon`.
fn expected_keys(horizon: DateTime<Utc>) -> BTreeSet<String> {
    (0..SCHEDULES)
        .flat_map(|i| {
            let (spec, zone) = SPECS[i % SPECS.len()];
            tick_keys(
                &format!("r-{i}"),
                &timetable(spec, zone, t0()),
                t0(),
                horizon,
            )
        })
        .collect()
}

async fn race(pool: &PgPool, planners: usize) {
    insert_bulk(
        pool,
        "r",
        SCHEDULES,
        |i| SPECS[i % SPECS.len()],
        |t| t.first_at_or_after(t0()),
        t0(),
    )
    .await;
    let mut pools = Vec::new();
    for _ in 0..planners {
        pools.push(other_pool(pool).await);
    }
    let (mut planned, mut inserted, mut claims) = (0usize, 0u64, vec![0usize; planners]);
    let steps = 4;
    for step in 0..steps {
        let now = t0() + Duration::seconds(20 * step);
        let tasks: Vec<_> = pools
            .iter()
            .map(|pool| {
                let mut config = config(Some(now));
                config.batch_size = 25; // many small batches: the planners interleave
                let planner = Planner::new(pool.clone(), config);
                tokio::spawn(async move { drain(&planner).await })
            })
            .collect();
        for (i, task) in tasks.into_iter().enumerate() {
            for report in task.await.expect("planner task") {
                planned += report.planned;
                inserted += report.inserted;
                claims[i] += report.claimed;
            }
        }
    }
    let horizon = t0() + Duration::seconds(20 * (steps - 1) + 60);
    let expected = expected_keys(horizon);
    assert_eq!(all_keys(pool).await, expected, "every tick, nothing else");
    // No two planners ever planned the same tick: every planned row was a fresh insert.
    assert_eq!((planned, inserted), (expected.len(), expected.len() as u64));
    println!("{planners} planners, claims per planner: {claims:?}, runs: {inserted}");
}

#[tokio::test]
async fn two_racing_planners_plan_every_tick_exactly_once() {
    let db = TestDb::new().await;
    let pool = db.pool();
    race(&pool, 2).await;
}

#[tokio::test]
async fn three_racing_planners_plan_every_tick_exactly_once() {
    let db = TestDb::new().await;
    let pool = db.pool();
    race(&pool, 3).await;
}

const CHILD_DB_ENV: &str = "KAIROS_TEST_PLANNER_DB";
const CHILD_NOW_ENV: &str = "KAIROS_TEST_PLANNER_NOW";

/// Not a test on its own: the child process of
/// [`a_planner_killed_between_claim_and_commit_loses_and_doubles_nothing`], which runs one
/// pass and is expected to abort at `KAIROS_CRASH_AT`.
#[tokio::test]
#[ignore = "child process of the kill test"]
async fn planner_child_process() {
    let (Ok(url), Ok(now)) = (std::env::var(CHILD_DB_ENV), std::env::var(CHILD_NOW_ENV)) else {
        return;
    };
    let pool = PgPool::connect(&url).await.expect("child connects");
    Planner::new(pool, config(Some(ts(&now))))
        .pass()
        .await
        .expect("child pass");
    println!("child pass committed");
}

/// The URL of this test's database, for a child process.
async fn database_url(pool: &PgPool) -> String {
    let name: String = sqlx::query_scalar("select current_database()")
        .fetch_one(pool)
        .await
        .expect("database name");
    let base = std::env::var("KAIROS_TEST_DATABASE_URL")
        .expect("KAIROS_TEST_DATABASE_URL (set in .cargo/config.toml)");
    let server = base.rsplit_once('/').expect("a URL with a database").0;
    format!("{server}/{name}")
}

#[tokio::test]
async fn a_planner_killed_between_claim_and_commit_loses_and_doubles_nothing() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let now = "2026-03-29T00:59:30Z";
    insert_bulk(
        &pool,
        "r",
        SCHEDULES,
        |i| SPECS[i % SPECS.len()],
        |t| t.first_at_or_after(t0()),
        t0(),
    )
    .await;
    // Some ticks exist already (an earlier pass), so the killed pass has rows to "double".
    drain(&planner(&pool, "2026-03-29T00:59:00Z")).await;
    let before = all_keys(&pool).await;
    let url = database_url(&pool).await;
    for point in ["planner_after_claim", "planner_before_commit"] {
        let output = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                test_name!("planner_child_process"),
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env(CHILD_DB_ENV, &url)
            .env(CHILD_NOW_ENV, now)
            .env(kairos_worker::crash::CRASH_AT_ENV, point)
            .output()
            .expect("spawn the child planner");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            !output.status.success(),
            "the child planner must die at {point}: {stdout}"
        );
        assert!(!stdout.contains("child pass committed"));
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(output.status.signal(), Some(6), "SIGABRT at {point}");
        }
        assert_eq!(
            all_keys(&pool).await,
            before,
            "the killed pass left nothing behind"
        );
    }

    // Its locks die with its session: a healthy planner claims the same schedules (polling
    // until PostgreSQL has noticed the dead connection) and plans every tick once.
    let survivor = planner(&pool, now);
    let deadline = Instant::now() + StdDuration::from_secs(10);
    let mut reports = Vec::new();
    while reports.is_empty() {
        assert!(
            Instant::now() < deadline,
            "the dead planner's claims were never released"
        );
        reports = drain(&survivor).await;
        if reports.is_empty() {
            tokio::time::sleep(StdDuration::from_millis(20)).await;
        }
    }
    let expected = expected_keys(ts(now) + Duration::seconds(60));
    assert_eq!(all_keys(&pool).await, expected);
    let inserted: u64 = reports.iter().map(|r| r.inserted).sum();
    assert_eq!(inserted as usize, expected.len() - before.len());
}
