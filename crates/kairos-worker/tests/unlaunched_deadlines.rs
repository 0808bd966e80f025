//! Deadlines of ticks that never launched, on real PostgreSQL (and a real nats-server
//! behind the sweepers and the dispatcher), with the database clock pinned: a missed tick
//! that the catch-up policy drops, and a tick of a schedule that is paused, get a `SKIPPED`
//! run with their deadline, once, however many planners and sweepers race, and are marked
//! late by the sweep; a tick written while paused becomes the catch-up run of a pause that
//! ended (one row, one publish, its late mark kept), and stays `SKIPPED` under catch-up
//! `none`; schedules without a deadline get no such rows.

use crate::dispatcher_support;
use crate::planner_support;

use std::time::Duration as StdDuration;

use chrono::{DateTime, Utc};
use kairos_core::{Run, RunKey, RunStatus};
use kairos_launcher::NatsLauncher;
use kairos_registrar::PauseChange;
use kairos_store::{runs, PgPool};
use kairos_testkit::prometheus::sample;
use kairos_testkit::TestDb;
use kairos_worker::dispatcher::Dispatcher;
use kairos_worker::metrics as m;
use kairos_worker::planner::Planner;
use kairos_worker::sweep::Sweeper;
use planner_support::{config, input, other_pool, registrar, runs_of, stored, ts, upsert};

fn pause(until: Option<&str>) -> PauseChange<'static> {
    PauseChange {
        paused: true,
        note: Some("vendor freeze"),
        until: until.map(ts),
    }
}

/// A schedule `id` (spec, catch-up policy, deadline; overlap `allow`) written at 10:30 and
/// paused at 10:31 by "ops" ("vendor freeze"), until `until` if given.
async fn paused(
    pool: &PgPool,
    id: &str,
    spec: &str,
    catchup: &str,
    deadline_s: Option<i64>,
    until: Option<&str>,
) {
    let times = ("2026-03-09T10:30:00Z", "2026-03-09T10:31:00Z");
    paused_at(pool, (id, spec, catchup), deadline_s, until, times).await;
}

/// [`paused`], written and paused at the given times.
async fn paused_at(
    pool: &PgPool,
    (id, spec, catchup): (&str, &str, &str),
    deadline_s: Option<i64>,
    until: Option<&str>,
    (written, paused): (&str, &str),
) {
    let mut schedule = input(id, spec);
    schedule.catchup_policy = Some(catchup.into());
    schedule.deadline_s = deadline_s;
    schedule.overlap_policy = Some("allow".into());
    upsert(pool, written, schedule).await;
    registrar(pool, paused)
        .pause(id, pause(until), "ops")
        .await
        .expect("pause");
}

/// A planner at `now`, keeping at most `max_catchup` missed ticks.
fn planner_at(pool: &PgPool, now: &str, max_catchup: u32) -> Planner {
    let mut config = config(Some(ts(now)));
    config.max_catchup = max_catchup;
    Planner::new(pool.clone(), config)
}

fn sweeper(pool: &PgPool, launcher: &NatsLauncher) -> Sweeper<NatsLauncher> {
    dispatcher_support::sweeper(pool, launcher)
}

/// Each run of `id` as (tick, status, reason), oldest first.
async fn rows(pool: &PgPool, id: &str) -> Vec<(DateTime<Utc>, RunStatus, Option<String>)> {
    runs_of(pool, id)
        .await
        .into_iter()
        .map(|r| (r.run_at, r.status, r.reason))
        .collect()
}

async fn run(pool: &PgPool, id: &str, tick: &str) -> Run {
    let key = RunKey::tick(id, ts(tick));
    runs::get(pool, key.as_str())
        .await
        .expect("read")
        .unwrap_or_else(|| panic!("{id}: a run of {tick}"))
}

fn counter(text: &str, name: &str) -> f64 {
    sample(text, name, &[]).unwrap_or_else(|| panic!("{name} missing in:\n{text}"))
}

fn skipped(tick: &str, why: &str) -> (DateTime<Utc>, RunStatus, Option<String>) {
    (ts(tick), RunStatus::Skipped, Some(why.to_string()))
}

fn pending(tick: &str) -> (DateTime<Utc>, RunStatus, Option<String>) {
    (ts(tick), RunStatus::Pending, None)
}

#[tokio::test]
async fn dropped_missed_ticks_get_a_skipped_run_and_are_late_at_their_deadline() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let recorder = m::recorder();
    let handle = recorder.handle();
    let _local = metrics::set_default_local_recorder(&recorder);
    m::zero();
    let (_server, launcher) = dispatcher_support::nats().await;
    // Every 10 minutes, paused from 11:56 until 12:00 (no tick in between); deadlines 5
    // minutes after each tick.
    let until = Some("2026-03-09T12:00:00Z");
    let times = ("2026-03-09T11:55:00Z", "2026-03-09T11:56:00Z");
    let every = "*/10 * * * *";
    paused_at(&pool, ("none", every, "none"), Some(300), until, times).await;
    let capped = ("capped", every, "fire_immediately");
    paused_at(&pool, capped, Some(300), until, times).await;
    let plain = ("no-deadline", every, "none");
    paused_at(&pool, plain, None, until, times).await;

    // No planner ran from 12:00 to 12:30; then two at once (max_catchup 1).
    let other = other_pool(&pool).await;
    let (a, b) = (
        planner_at(&pool, "2026-03-09T12:30:00Z", 1),
        planner_at(&other, "2026-03-09T12:30:00Z", 1),
    );
    let (first, second) = tokio::join!(a.pass(), b.pass());
    first.expect("pass a");
    second.expect("pass b");
    planner_support::drain(&a).await;
    planner_support::drain(&b).await;

    let none = "missed: catch-up none";
    assert_eq!(
        rows(&pool, "none").await,
        [
            skipped("2026-03-09T12:00:00Z", none),
            skipped("2026-03-09T12:10:00Z", none),
            skipped("2026-03-09T12:20:00Z", none),
            pending("2026-03-09T12:30:00Z"),
        ],
        "each dropped tick has one SKIPPED run"
    );
    let older = "missed: older than max_catchup";
    assert_eq!(
        rows(&pool, "capped").await,
        [
            skipped("2026-03-09T12:00:00Z", older),
            skipped("2026-03-09T12:10:00Z", older),
            pending("2026-03-09T12:20:00Z"),
            pending("2026-03-09T12:30:00Z"),
        ],
        "the newest max_catchup missed tick is caught up, the older ones are SKIPPED"
    );
    assert_eq!(
        rows(&pool, "no-deadline").await,
        [pending("2026-03-09T12:30:00Z")],
        "no deadline: dropped ticks are only counted, as before"
    );
    let dropped = run(&pool, "none", "2026-03-09T12:10:00Z").await;
    assert_eq!(dropped.deadline_at, Some(ts("2026-03-09T12:15:00Z")));
    assert_eq!(dropped.source.as_str(), "schedule");

    // The sweep marks the dropped ticks late once their deadline has passed.
    let sweep = sweeper(&pool, &launcher);
    let marked = sweep.mark_late(Some(ts("2026-03-09T12:12:00Z"))).await;
    assert_eq!(marked.expect("sweep"), 2, "12:00 of both (deadline 12:05)");
    let at = ts("2026-03-09T12:31:00Z");
    // The 12:10 and 12:20 ticks of `none`, 12:10 of `capped`, and its 12:20 catch-up,
    // still PENDING at its deadline.
    assert_eq!(sweep.mark_late(Some(at)).await.expect("sweep"), 4);
    let late = run(&pool, "none", "2026-03-09T12:20:00Z").await;
    assert_eq!(late.late_at, Some(at));
    assert_eq!(
        late.late_reason.as_deref(),
        Some(
            "ended SKIPPED at 2026-03-09T12:20:00Z (missed: catch-up none): not SUCCESS by \
             its deadline 2026-03-09T12:25:00Z"
        )
    );
    assert_eq!(counter(&handle.render(), m::RUNS_LATE), 6.0);

    // Nothing publishes a SKIPPED run: a dispatcher sends exactly the PENDING ones.
    let mut dispatch = dispatcher_support::config();
    dispatch.launch_deadline = StdDuration::from_secs(400 * 86_400);
    let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), dispatch);
    dispatcher_support::drain(&dispatcher).await;
    let mut sent = dispatcher_support::stream_ids(&launcher).await;
    sent.sort();
    let mut expected: Vec<String> = [
        ("none", "2026-03-09T12:30:00Z"),
        ("capped", "2026-03-09T12:20:00Z"),
        ("capped", "2026-03-09T12:30:00Z"),
        ("no-deadline", "2026-03-09T12:30:00Z"),
    ]
    .iter()
    .map(|(id, tick)| RunKey::tick(id, ts(tick)).as_str().to_string())
    .collect();
    expected.sort();
    assert_eq!(sent, expected);
}

#[tokio::test]
async fn a_paused_tick_is_late_while_the_schedule_stays_paused() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let recorder = m::recorder();
    let handle = recorder.handle();
    let _local = metrics::set_default_local_recorder(&recorder);
    m::zero();
    let (_server, launcher) = dispatcher_support::nats().await;
    paused(
        &pool,
        "hourly",
        "0 * * * *",
        "fire_immediately",
        Some(600),
        None,
    )
    .await;
    paused(
        &pool,
        "no-deadline",
        "0 * * * *",
        "fire_immediately",
        None,
        None,
    )
    .await;
    let one = sweeper(&pool, &launcher);
    let second_pool = other_pool(&pool).await;
    let two = sweeper(&second_pool, &launcher);

    // Two sweepers at once after the 11:00 tick: it gets one SKIPPED run naming the pause,
    // not late before its deadline (11:10).
    let early = ts("2026-03-09T11:05:00Z");
    let (a, b) = tokio::join!(one.mark_late(Some(early)), two.mark_late(Some(early)));
    assert_eq!(a.expect("sweep one") + b.expect("sweep two"), 0);
    let by_pause = "paused by ops: vendor freeze";
    assert_eq!(
        rows(&pool, "hourly").await,
        [skipped("2026-03-09T11:00:00Z", by_pause)]
    );
    let tick = run(&pool, "hourly", "2026-03-09T11:00:00Z").await;
    assert_eq!(tick.deadline_at, Some(ts("2026-03-09T11:10:00Z")));
    assert_eq!(tick.late_at, None);

    // Past the deadline, still paused: late, once.
    let at = ts("2026-03-09T11:15:00Z");
    let (a, b) = tokio::join!(one.mark_late(Some(at)), two.mark_late(Some(at)));
    assert_eq!(a.expect("sweep one") + b.expect("sweep two"), 1);
    assert!(stored(&pool, "hourly").await.paused, "nobody resumed it");
    let tick = run(&pool, "hourly", "2026-03-09T11:00:00Z").await;
    assert_eq!(tick.late_at, Some(at));
    assert_eq!(
        tick.late_reason.as_deref(),
        Some(
            "ended SKIPPED at 2026-03-09T11:00:00Z (paused by ops: vendor freeze): not \
             SUCCESS by its deadline 2026-03-09T11:10:00Z"
        )
    );
    // Hours later each tick has had its one row, and the schedule without a deadline none.
    let later = ts("2026-03-09T14:30:00Z");
    let (a, b) = tokio::join!(one.mark_late(Some(later)), two.mark_late(Some(later)));
    assert_eq!(a.expect("sweep one") + b.expect("sweep two"), 3);
    assert_eq!(
        rows(&pool, "hourly").await,
        [
            skipped("2026-03-09T11:00:00Z", by_pause),
            skipped("2026-03-09T12:00:00Z", by_pause),
            skipped("2026-03-09T13:00:00Z", by_pause),
            skipped("2026-03-09T14:00:00Z", by_pause),
        ]
    );
    assert!(runs_of(&pool, "no-deadline").await.is_empty());
    assert_eq!(counter(&handle.render(), m::RUNS_LATE), 4.0);

    // A resume by hand continues from now (no catch-up of the paused span): the paused
    // ticks stay SKIPPED and late, the one no sweep saw (15:00) gets its run from the
    // resume, and the next tick is planned as usual.
    registrar(&pool, "2026-03-09T15:20:00Z")
        .pause("hourly", PauseChange::default(), "ops")
        .await
        .expect("resume");
    registrar(&pool, "2026-03-09T15:21:00Z")
        .pause("no-deadline", PauseChange::default(), "ops")
        .await
        .expect("resume");
    planner_support::drain(&planner_at(&pool, "2026-03-09T15:59:30Z", 100)).await;
    let after = rows(&pool, "hourly").await;
    assert_eq!(after.len(), 6, "{after:?}");
    assert_eq!(after[0], skipped("2026-03-09T11:00:00Z", by_pause));
    assert_eq!(after[4], skipped("2026-03-09T15:00:00Z", by_pause));
    assert_eq!(after[5].0, ts("2026-03-09T16:00:00Z"));
    assert_eq!(after[5].1, RunStatus::Pending);
    assert_eq!(
        runs_of(&pool, "no-deadline").await.len(),
        1,
        "only its 16:00 tick"
    );
}

#[tokio::test]
async fn a_paused_tick_becomes_the_catch_up_run_when_the_pause_ends() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let recorder = m::recorder();
    let handle = recorder.handle();
    let _local = metrics::set_default_local_recorder(&recorder);
    m::zero();
    let (_server, launcher) = dispatcher_support::nats().await;
    let until = Some("2026-03-09T10:45:00Z");
    paused(
        &pool,
        "fire",
        "0 * * * *",
        "fire_immediately",
        Some(600),
        until,
    )
    .await;
    paused(&pool, "none", "0 * * * *", "none", Some(600), until).await;

    // The pause ended at 10:45, but no planner ran until 11:20: at 11:15 both schedules
    // are still paused, so the sweep writes their 11:00 tick SKIPPED and marks it late.
    let at = ts("2026-03-09T11:15:00Z");
    assert_eq!(
        sweeper(&pool, &launcher)
            .mark_late(Some(at))
            .await
            .expect("sweep"),
        2
    );

    // The planner resumes both from 10:45, catching up per each policy.
    planner_support::drain(&planner_at(&pool, "2026-03-09T11:20:00Z", 100)).await;
    let fire = run(&pool, "fire", "2026-03-09T11:00:00Z").await;
    assert_eq!(fire.status, RunStatus::Pending, "{fire:?}");
    assert_eq!(fire.fire_at, ts("2026-03-09T11:20:00Z"), "caught up now");
    assert_eq!((fire.reason.as_deref(), fire.finished_at), (None, None));
    assert_eq!(fire.late_at, Some(at), "the late mark is kept");
    assert_eq!(
        rows(&pool, "none").await,
        [skipped(
            "2026-03-09T11:00:00Z",
            "paused by ops: vendor freeze"
        )],
        "catch-up none: the tick stays SKIPPED"
    );

    // One publish of the tick, under its key.
    let mut dispatch = dispatcher_support::config();
    dispatch.launch_deadline = StdDuration::from_secs(400 * 86_400);
    let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), dispatch);
    dispatcher_support::drain(&dispatcher).await;
    let sent = dispatcher_support::stream_ids(&launcher).await;
    assert_eq!(sent, std::slice::from_ref(&fire.idempotency_key));
    assert_eq!(
        runs_of(&pool, "fire").await.len(),
        1,
        "one row for the tick"
    );
    let fire = run(&pool, "fire", "2026-03-09T11:00:00Z").await;
    assert_eq!(fire.status, RunStatus::Enqueued);
    assert_eq!(fire.late_at, Some(at));

    // Later sweeps count nothing twice; the caught-up run is overdue until it ends.
    let later = ts("2026-03-09T11:30:00Z");
    assert_eq!(
        sweeper(&pool, &launcher)
            .mark_late(Some(later))
            .await
            .expect("sweep"),
        0
    );
    let text = handle.render();
    assert_eq!(counter(&text, m::RUNS_LATE), 2.0, "{text}");
    assert_eq!(counter(&text, m::RUNS_OVERDUE), 1.0, "{text}");
}
