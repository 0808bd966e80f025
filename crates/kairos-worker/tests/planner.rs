//! The planner on the real PostgreSQL with a pinned database "now": what one pass writes,
//! each catch-up policy, jitter, the window, `@at`, pause/resume, edit, parking, backfill
//! against planned ticks, and the database clock as the only clock.

use crate::planner_support;

use chrono::{Duration, Utc};
use kairos_core::{jitter_offset, RunKey, RunSource, RunStatus};
use kairos_registrar::Registrar;
use kairos_store::planning;
use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use kairos_worker::planner::Planner;
use planner_support::*;

#[tokio::test]
async fn a_pass_writes_the_ticks_within_the_lookahead_once() {
    let db = TestDb::new().await;
    let pool = db.pool();
    upsert(&pool, "2026-03-09T10:00:00Z", input("s1", "*/10 * * * * *")).await;
    let report = planner(&pool, "2026-03-09T10:00:00Z")
        .pass()
        .await
        .expect("pass");
    assert_eq!((report.claimed, report.inserted), (1, 7));
    let runs = runs_of(&pool, "s1").await;
    let expected = ticks(
        &timetable("*/10 * * * * *", "UTC", ts("2026-03-09T10:00:00Z")),
        ts("2026-03-09T10:00:00Z"),
        ts("2026-03-09T10:01:00Z"),
    );
    assert_eq!(runs.iter().map(|r| r.run_at).collect::<Vec<_>>(), expected);
    for run in &runs {
        assert_eq!(run.idempotency_key, RunKey::tick("s1", run.run_at).as_str());
        assert_eq!(
            (run.status, run.source),
            (RunStatus::Pending, RunSource::Schedule)
        );
        assert_eq!(
            (run.workflow_id.as_str(), run.version, run.user_id.as_str()),
            ("wf", 3, "u1")
        );
        assert_eq!(run.fire_at, run.run_at, "no jitter configured");
    }
    assert_eq!(
        stored(&pool, "s1").await.next_run_at,
        Some(ts("2026-03-09T10:01:10Z"))
    );

    // Same now again: nothing is due. Ten seconds later: exactly the one new tick.
    assert_eq!(
        planner(&pool, "2026-03-09T10:00:00Z")
            .pass()
            .await
            .expect("pass")
            .claimed,
        0
    );
    let later = planner(&pool, "2026-03-09T10:00:10Z")
        .pass()
        .await
        .expect("pass");
    assert_eq!((later.claimed, later.inserted), (1, 1));
    assert_eq!(runs_of(&pool, "s1").await.len(), 8);
}

#[tokio::test]
async fn catchup_none_counts_missed_ticks_and_fires_only_within_grace() {
    let db = TestDb::new().await;
    let pool = db.pool();
    upsert(&pool, "2026-03-09T09:00:00Z", input("s1", "* * * * *")).await;
    let report = planner(&pool, "2026-03-09T10:00:00Z")
        .pass()
        .await
        .expect("pass");
    // 09:00..09:58 are older than now - 60 s: missed. 09:59 is within the grace (late),
    // 10:00 and 10:01 are on time.
    assert_eq!((report.missed, report.inserted), (59, 3));
    assert_eq!(
        run_ats(&pool, "s1").await,
        vec![
            ts("2026-03-09T09:59:00Z"),
            ts("2026-03-09T10:00:00Z"),
            ts("2026-03-09T10:01:00Z")
        ]
    );
    let (missed, error) = planning::planner_stats(&pool, "s1")
        .await
        .expect("stats")
        .expect("row");
    assert_eq!((missed, error), (59, None));
    assert_eq!(
        stored(&pool, "s1").await.next_run_at,
        Some(ts("2026-03-09T10:02:00Z"))
    );
}

#[tokio::test]
async fn catchup_fire_immediately_fires_the_newest_now_bounded_per_pass() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let mut schedule = input("s1", "* * * * *");
    schedule.catchup_policy = Some("fire_immediately".into());
    upsert(&pool, "2026-03-09T09:00:00Z", schedule).await;
    let now = ts("2026-03-09T10:00:00Z");
    let mut config = config(Some(now));
    config.max_catchup = 20;
    config.max_catchup_per_pass = 10;
    let planner = Planner::new(pool.clone(), config);

    let first = planner.pass().await.expect("pass");
    // The newest 20 of the 59 missed ticks are candidates; 10 fire in this pass.
    assert_eq!((first.missed, first.inserted), (39, 10));
    assert_eq!(
        stored(&pool, "s1").await.next_run_at,
        Some(ts("2026-03-09T09:49:00Z"))
    );
    let rest = drain(&planner).await;
    assert_eq!(rest.iter().map(|r| r.inserted).sum::<u64>(), 13);

    let runs = runs_of(&pool, "s1").await;
    let expected = ticks(
        &timetable("* * * * *", "UTC", now),
        ts("2026-03-09T09:39:00Z"),
        ts("2026-03-09T10:01:00Z"),
    );
    assert_eq!(runs.iter().map(|r| r.run_at).collect::<Vec<_>>(), expected);
    for run in &runs {
        if run.run_at < ts("2026-03-09T09:59:00Z") {
            assert_eq!(run.fire_at, now, "catch-up fires now: {run:?}");
        } else {
            assert_eq!(run.fire_at, run.run_at, "on time or within grace: {run:?}");
        }
    }
    let (missed, _) = planning::planner_stats(&pool, "s1")
        .await
        .expect("stats")
        .expect("row");
    assert_eq!(missed, 39);
}

#[tokio::test]
async fn catchup_spread_spreads_missed_ticks_across_the_lookahead() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let mut schedule = input("s1", "* * * * *");
    schedule.catchup_policy = Some("spread".into());
    upsert(&pool, "2026-03-09T09:00:00Z", schedule).await;
    let now = ts("2026-03-09T10:00:00Z");
    let report = planner(&pool, "2026-03-09T10:00:00Z")
        .pass()
        .await
        .expect("pass");
    assert_eq!((report.missed, report.inserted), (0, 62));
    let runs = runs_of(&pool, "s1").await;
    let catchup: Vec<_> = runs
        .iter()
        .filter(|r| r.run_at < ts("2026-03-09T09:59:00Z"))
        .collect();
    assert_eq!(catchup.len(), 59);
    for (i, run) in catchup.iter().enumerate() {
        // The i-th oldest fires at now + lookahead * i / 59: evenly, oldest first.
        let expected = now + Duration::seconds(60) * i as i32 / 59;
        // PostgreSQL keeps microseconds.
        assert!(
            (run.fire_at - expected).abs() < Duration::microseconds(1),
            "{run:?}"
        );
        assert!(run.fire_at >= now && run.fire_at < now + Duration::seconds(60));
    }
}

#[tokio::test]
async fn jitter_is_bounded_and_the_same_for_every_instance() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let mut schedule = input("s1", "* * * * * *");
    schedule.jitter_ms = Some(5_000);
    upsert(&pool, "2026-03-09T10:00:00Z", schedule).await;
    let report = planner(&pool, "2026-03-09T10:00:00Z")
        .pass()
        .await
        .expect("pass");
    assert_eq!(report.inserted, 61);
    let offsets: Vec<i64> = runs_of(&pool, "s1")
        .await
        .iter()
        .map(|run| {
            let offset = run.fire_at - run.run_at;
            // Deterministic: the offset is a function of the key alone.
            assert_eq!(
                offset,
                jitter_offset(&RunKey::tick("s1", run.run_at), 5_000)
            );
            offset.num_milliseconds()
        })
        .collect();
    assert!(
        offsets.iter().all(|o| (-5_000..=5_000).contains(o)),
        "{offsets:?}"
    );
    assert!(
        offsets.iter().any(|o| *o < 0) && offsets.iter().any(|o| *o > 0),
        "{offsets:?}"
    );
}

#[tokio::test]
async fn the_window_bounds_ticks_and_a_finished_schedule_is_exhausted() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let mut schedule = input("s1", "*/10 * * * * *");
    schedule.start_at = Some(ts("2026-03-09T10:00:30Z"));
    schedule.end_at = Some(ts("2026-03-09T10:02:00Z"));
    upsert(&pool, "2026-03-09T10:00:00Z", schedule).await;
    drain(&planner(&pool, "2026-03-09T10:00:00Z")).await;
    drain(&planner(&pool, "2026-03-09T10:01:30Z")).await;
    let expected = ticks(
        &timetable("*/10 * * * * *", "UTC", ts("2026-03-09T10:00:00Z")),
        ts("2026-03-09T10:00:30Z"),
        ts("2026-03-09T10:02:00Z"),
    );
    assert_eq!(expected.len(), 10);
    assert_eq!(run_ats(&pool, "s1").await, expected);
    assert_eq!(stored(&pool, "s1").await.next_run_at, None, "exhausted");
    assert!(drain(&planner(&pool, "2026-03-09T11:00:00Z"))
        .await
        .is_empty());
}

#[tokio::test]
async fn a_one_time_schedule_fires_once_then_is_exhausted() {
    let db = TestDb::new().await;
    let pool = db.pool();
    upsert(
        &pool,
        "2026-03-09T10:00:00Z",
        input("once", "@at 2026-03-09T10:00:30Z"),
    )
    .await;
    let report = planner(&pool, "2026-03-09T10:00:00Z")
        .pass()
        .await
        .expect("pass");
    assert_eq!(report.inserted, 1);
    assert_eq!(
        run_ats(&pool, "once").await,
        vec![ts("2026-03-09T10:00:30Z")]
    );
    assert_eq!(stored(&pool, "once").await.next_run_at, None);
}

#[tokio::test]
async fn a_paused_schedule_plans_nothing_and_resumes_from_now() {
    let db = TestDb::new().await;
    let pool = db.pool();
    upsert(&pool, "2026-03-09T10:00:00Z", input("s1", "* * * * *")).await;
    registrar(&pool, "2026-03-09T10:00:00Z")
        .set_paused("s1", true)
        .await
        .expect("pause");
    assert!(drain(&planner(&pool, "2026-03-09T12:00:00Z"))
        .await
        .is_empty());
    assert!(runs_of(&pool, "s1").await.is_empty());

    registrar(&pool, "2026-03-09T12:00:00Z")
        .set_paused("s1", false)
        .await
        .expect("resume");
    drain(&planner(&pool, "2026-03-09T12:00:00Z")).await;
    // No catch-up of the paused span: the first tick is the resume time.
    assert_eq!(
        run_ats(&pool, "s1").await,
        vec![ts("2026-03-09T12:00:00Z"), ts("2026-03-09T12:01:00Z")]
    );
    let (missed, _) = planning::planner_stats(&pool, "s1")
        .await
        .expect("stats")
        .expect("row");
    assert_eq!(missed, 0);
}

#[tokio::test]
async fn an_edited_schedule_plans_the_new_spec() {
    let db = TestDb::new().await;
    let pool = db.pool();
    upsert(&pool, "2026-03-09T10:00:00Z", input("s1", "*/10 * * * * *")).await;
    drain(&planner(&pool, "2026-03-09T10:00:00Z")).await;
    upsert(&pool, "2026-03-09T10:00:05Z", input("s1", "*/15 * * * * *")).await;
    drain(&planner(&pool, "2026-03-09T10:00:05Z")).await;
    let runs = runs_of(&pool, "s1").await;
    let live: Vec<_> = runs
        .iter()
        .filter(|r| r.status == RunStatus::Pending && r.run_at >= ts("2026-03-09T10:00:05Z"))
        .map(|r| r.run_at)
        .collect();
    let expected = ticks(
        &timetable("*/15 * * * * *", "UTC", ts("2026-03-09T10:00:05Z")),
        ts("2026-03-09T10:00:05Z"),
        ts("2026-03-09T10:01:05Z"),
    );
    assert_eq!(live, expected);
    let cancelled: Vec<_> = runs
        .iter()
        .filter(|r| r.status == RunStatus::Cancelled)
        .map(|r| r.run_at)
        .collect();
    assert_eq!(
        cancelled,
        ["10:00:10", "10:00:20", "10:00:40", "10:00:50"]
            .map(|t| ts(&format!("2026-03-09T{t}Z")))
            .to_vec()
    );
}

#[tokio::test]
async fn a_schedule_that_no_longer_parses_is_parked_without_blocking_others() {
    let db = TestDb::new().await;
    let pool = db.pool();
    upsert(&pool, "2026-03-09T10:00:00Z", input("bad", "* * * * *")).await;
    upsert(&pool, "2026-03-09T10:00:00Z", input("good", "* * * * *")).await;
    // Only a core change could do this; simulate it behind the registrar's back.
    sqlx::query("update schedules set cron_expr = '@reboot' where schedule_id = 'bad'")
        .execute(&pool)
        .await
        .expect("corrupt");
    let report = planner(&pool, "2026-03-09T10:00:00Z")
        .pass()
        .await
        .expect("pass");
    assert_eq!((report.claimed, report.parked, report.inserted), (2, 1, 2));
    assert_eq!(stored(&pool, "bad").await.next_run_at, None);
    let (_, error) = planning::planner_stats(&pool, "bad")
        .await
        .expect("stats")
        .expect("row");
    assert!(error.is_some_and(|e| e.starts_with("cron_expr")));
    assert!(runs_of(&pool, "bad").await.is_empty());
    assert_eq!(runs_of(&pool, "good").await.len(), 2);
    // Parked, it is never claimed again (no error loop).
    assert!(drain(&planner(&pool, "2026-03-09T10:05:00Z"))
        .await
        .iter()
        .all(|r| r.parked == 0));
}

#[tokio::test]
async fn backfill_over_planned_ticks_counts_them_present_and_the_planner_skips_backfilled() {
    let db = TestDb::new().await;
    let pool = db.pool();
    upsert(&pool, "2026-03-09T10:00:00Z", input("s1", "*/10 * * * * *")).await;
    drain(&planner(&pool, "2026-03-09T10:00:00Z")).await; // 10:00:00 ..= 10:01:00
    let done = registrar(&pool, "2026-03-09T10:02:00Z")
        .backfill(
            "s1",
            ts("2026-03-09T09:59:00Z"),
            ts("2026-03-09T10:01:30Z"),
            None,
        )
        .await
        .expect("backfill");
    assert_eq!((done.ticks, done.created, done.already_present), (16, 9, 7));
    let reports = drain(&planner(&pool, "2026-03-09T10:01:00Z")).await; // 10:01:10 ..= 10:02:00
    assert_eq!(
        reports
            .iter()
            .map(|r| (r.planned, r.inserted))
            .collect::<Vec<_>>(),
        vec![(6, 3)]
    );
    let runs = runs_of(&pool, "s1").await;
    let expected = ticks(
        &timetable("*/10 * * * * *", "UTC", ts("2026-03-09T10:00:00Z")),
        ts("2026-03-09T09:59:00Z"),
        ts("2026-03-09T10:02:00Z"),
    );
    assert_eq!(runs.iter().map(|r| r.run_at).collect::<Vec<_>>(), expected);
    let backfilled = runs
        .iter()
        .filter(|r| r.source == RunSource::Backfill)
        .count();
    assert_eq!(backfilled, 9);
}

/// Invariant "the database clock decides". Pinned database "now"s years away from the
/// instance's clock decide alone what is planned; unpinned, the pass's now is the database's;
/// and neither the planner nor its SQL can read the instance's wall clock at all.
#[tokio::test]
async fn only_the_database_clock_decides_what_is_planned() {
    let db = TestDb::new().await;
    let pool = db.pool();
    for (id, now) in [
        ("future", "2031-07-01T00:00:00Z"),
        ("past", "2019-01-01T00:00:00Z"),
    ] {
        upsert(&pool, now, input(id, "*/30 * * * * *")).await;
        let report = planner(&pool, now).pass().await.expect("pass");
        assert_eq!(report.now, ts(now));
        let expected = ticks(
            &timetable("*/30 * * * * *", "UTC", ts(now)),
            ts(now),
            ts(now) + Duration::seconds(60),
        );
        assert_eq!(run_ats(&pool, id).await, expected, "{id}");
    }

    let unpinned = Registrar::new(pool.clone(), Default::default());
    unpinned
        .upsert(&input("live", "* * * * * *"))
        .await
        .expect("upsert");
    let before: chrono::DateTime<Utc> = sqlx::query_scalar("select now()")
        .fetch_one(&pool)
        .await
        .expect("now");
    let report = Planner::new(pool.clone(), config(None))
        .pass()
        .await
        .expect("pass");
    let after: chrono::DateTime<Utc> = sqlx::query_scalar("select now()")
        .fetch_one(&pool)
        .await
        .expect("now");
    assert!(
        before <= report.now && report.now <= after,
        "the pass used the database's now"
    );
    assert!(run_ats(&pool, "live")
        .await
        .iter()
        .all(|t| *t <= report.now + Duration::seconds(60)));

    for (name, source) in [
        ("planner.rs", include_str!("../src/planner.rs")),
        (
            "planning.rs",
            include_str!("../../kairos-store/src/planning.rs"),
        ),
    ] {
        for clock in [
            "Utc::now",
            "SystemTime",
            "Local::now",
            "clock_timestamp",
            "Instant::now",
        ] {
            assert!(!source.contains(clock), "{name} reads a clock: {clock}");
        }
    }
}
