//! `max_runs` on real PostgreSQL: the planner creates exactly that many scheduled runs, then
//! the schedule is exhausted (`next_run_at` NULL, nothing remaining), even with planners
//! racing over many passes; manual triggers do not count, and raising the limit revives it.

use crate::planner_support;

use kairos_testkit::TestDb;

use chrono::Duration;
use kairos_core::RunSource;
use kairos_store::schedules;
use kairos_worker::planner::Planner;
use planner_support::*;

const T0: &str = "2026-05-01T10:00:00Z";

#[tokio::test]
async fn max_runs_2_fires_exactly_twice_then_the_schedule_is_exhausted() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let mut limited = input("s1", "*/10 * * * * *");
    limited.max_runs = Some(2);
    let stored = upsert(&pool, T0, limited.clone()).await;
    assert_eq!(
        (stored.max_runs, stored.remaining_runs()),
        (Some(2), Some(2))
    );

    // A manual trigger is not a scheduled run: it does not count.
    registrar(&pool, T0)
        .trigger("s1", "r1", None)
        .await
        .expect("trigger");
    // Lookahead 60 s holds 6 ticks; only 2 become runs, over as many passes as it takes.
    for step in 0..5 {
        let now = ts(T0) + Duration::seconds(30 * step);
        let mut config = config(Some(now));
        config.batch_size = 1;
        drain(&Planner::new(pool.clone(), config)).await;
    }
    let all = runs_of(&pool, "s1").await;
    let scheduled: Vec<_> = all
        .iter()
        .filter(|r| r.source == RunSource::Schedule)
        .map(|r| r.run_at)
        .collect();
    assert_eq!(
        scheduled,
        vec![ts("2026-05-01T10:00:00Z"), ts("2026-05-01T10:00:10Z")],
        "exactly the first two ticks"
    );
    assert_eq!(all.len(), 3, "two scheduled runs and the manual one");
    let row = schedules::get(&pool, "s1")
        .await
        .expect("read")
        .expect("s1");
    assert_eq!(row.next_run_at, None, "exhausted");
    assert_eq!(row.remaining_runs(), Some(0));

    // Resume after a pause keeps it exhausted; raising the limit revives it.
    let later = registrar(&pool, "2026-05-01T11:00:00Z");
    later.set_paused("s1", true).await.expect("pause");
    let resumed = later.set_paused("s1", false).await.expect("resume");
    assert_eq!(resumed.next_run_at, None);
    limited.max_runs = Some(3);
    let raised = later.upsert(&limited).await.expect("raise").schedule;
    assert_eq!(raised.remaining_runs(), Some(1));
    assert_eq!(raised.next_run_at, Some(ts("2026-05-01T11:00:00Z")));
}

#[tokio::test]
async fn racing_planners_never_exceed_max_runs() {
    let db = TestDb::new().await;
    let pool = db.pool();
    for i in 0..40 {
        let mut limited = input(&format!("s{i}"), "* * * * * *");
        limited.max_runs = Some(7);
        upsert(&pool, T0, limited).await;
    }
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let other = other_pool(&pool).await;
        tasks.push(tokio::spawn(async move {
            let mut config = config(Some(ts(T0)));
            config.batch_size = 3;
            drain(&Planner::new(other, config)).await;
        }));
    }
    for task in tasks {
        task.await.expect("planner");
    }
    for i in 0..40 {
        let id = format!("s{i}");
        assert_eq!(runs_of(&pool, &id).await.len(), 7, "{id}");
        let row = schedules::get(&pool, &id)
            .await
            .expect("read")
            .expect("row");
        assert_eq!((row.next_run_at, row.remaining_runs()), (None, Some(0)));
    }
}
