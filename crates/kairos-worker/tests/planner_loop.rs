//! The planner loop: a schedule write wakes a sleeping planner (LISTEN/NOTIFY) long before
//! its capped sleep would end, and shutdown ends the loop. Real database clock.
//!
//! Also the throughput figure (ignored by default):
//! `cargo test --release -p kairos-worker --test integration planner_loop:: -- --ignored --nocapture`.

use crate::planner_support;

use kairos_testkit::TestDb;
use std::time::{Duration as StdDuration, Instant};

use chrono::Duration;
use kairos_registrar::Registrar;
use kairos_store::PgPool;
use kairos_worker::planner::{Planner, PlannerConfig};
use planner_support::*;

async fn wait_for_runs(pool: &PgPool, schedule_id: &str, within: StdDuration) -> StdDuration {
    let started = Instant::now();
    while runs_of(pool, schedule_id).await.is_empty() {
        assert!(
            started.elapsed() < within,
            "no runs for {schedule_id} within {within:?}"
        );
        tokio::time::sleep(StdDuration::from_millis(20)).await;
    }
    started.elapsed()
}

#[tokio::test]
async fn an_upsert_wakes_a_sleeping_planner_and_shutdown_stops_it() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 3).await;
    let pool = db.pool();
    let registrar = Registrar::new(pool.clone(), Default::default());
    registrar
        .upsert(&input("first", "* * * * * *"))
        .await
        .expect("upsert");
    // A one-minute tick: after its first pass the planner sleeps at least tick / 4 = 15 s.
    let config = PlannerConfig {
        tick: StdDuration::from_secs(60),
        ..config(None)
    };
    let planner = Planner::new(pool.clone(), config);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        planner
            .run(async {
                let _ = stopped.await;
            })
            .await
    });
    wait_for_runs(&pool, "first", StdDuration::from_secs(10)).await;

    registrar
        .upsert(&input("second", "* * * * * *"))
        .await
        .expect("upsert");
    let waited = wait_for_runs(&pool, "second", StdDuration::from_secs(5)).await;
    println!("woken after {waited:?}");

    stop.send(()).expect("planner still running");
    let result = tokio::time::timeout(StdDuration::from_secs(5), task)
        .await
        .expect("the planner stops promptly")
        .expect("planner task");
    assert!(result.is_ok());
}

/// 10,000 schedules on `* * * * *` planned for one minute: wall time and runs per second.
#[tokio::test]
#[ignore = "measurement; run with --ignored --nocapture"]
async fn planner_throughput_10k_schedules_every_minute() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 3).await;
    let pool = db.pool();
    let n = 10_000;
    let minute = ts("2026-03-09T10:01:00Z");
    insert_bulk(
        &pool,
        "b",
        n,
        |_| ("* * * * *", "UTC"),
        |_| Some(minute),
        ts("2026-03-09T10:00:00Z"),
    )
    .await;
    for planners in [1usize, 2] {
        let now = minute - Duration::seconds(30) + Duration::minutes(planners as i64 - 1);
        let started = Instant::now();
        let tasks: Vec<_> = (0..planners)
            .map(|_| {
                let planner = Planner::new(pool.clone(), config(Some(now)));
                tokio::spawn(async move { drain(&planner).await })
            })
            .collect();
        let mut inserted = 0;
        for task in tasks {
            inserted += task
                .await
                .expect("task")
                .iter()
                .map(|r| r.inserted)
                .sum::<u64>();
        }
        let wall = started.elapsed();
        assert_eq!(inserted, n as u64);
        println!(
            "planners={planners} schedules={n} runs={inserted} wall={:.3}s runs/s={:.0}",
            wall.as_secs_f64(),
            inserted as f64 / wall.as_secs_f64()
        );
    }
}
