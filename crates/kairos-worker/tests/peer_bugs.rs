//! Regression tests named after bugs other schedulers shipped (`conformance/matrix.toml`
//! lists them with the guarantee each one breaks). The planner, the registrar and the
//! retention run on the real PostgreSQL with a pinned database "now", so hours of schedule
//! time (downtime, ten minutes of `@every 1s`, days of a daily schedule) pass without waiting.

use crate::dispatcher_support;
use crate::planner_support;

use chrono::{DateTime, Duration, Utc};
use kairos_core::{Run, RunStatus, Timetable};
use kairos_launcher::status::read_stream;
use kairos_registrar::{CalendarInput, Registrar, RulesInput, ScheduleInput, Settings};
use kairos_store::PgPool;
use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use kairos_worker::dispatcher::Dispatcher;
use kairos_worker::planner::{Planner, PlannerConfig};
use kairos_worker::retention::{Retention, RetentionConfig};
use planner_support::*;
use std::time::Duration as StdDuration;

/// Monday 5 January 2026, midnight UTC: the daily schedules' creation.
const T0: &str = "2026-01-05T00:00:00Z";
/// Wednesday 7 January, noon: the ticks of 5, 6 and 7 January at 09:00 have run.
const T1: &str = "2026-01-07T12:00:00Z";
/// Three days later: the planner has gone on under whatever the edit left.
const T2: &str = "2026-01-10T12:00:00Z";

/// A planner at `now` whose lookahead covers two weeks.
fn two_week_planner(pool: &PgPool, now: &str) -> Planner {
    Planner::new(
        pool.clone(),
        PlannerConfig {
            lookahead: Duration::days(14),
            ..config(Some(ts(now)))
        },
    )
}

fn daily() -> ScheduleInput {
    ScheduleInput {
        rules: RulesInput {
            exclude_calendars: Some(vec!["hol".into()]),
            ..RulesInput::default()
        },
        ..input("daily", "0 9 * * *")
    }
}

async fn put_calendar(pool: &PgPool, now: &str, dates: &[&str]) {
    registrar(pool, now)
        .put_calendar(&CalendarInput {
            name: "hol".into(),
            dates: dates.iter().map(|d| d.to_string()).collect(),
            description: None,
        })
        .await
        .expect("put calendar");
}

/// Makes every run of `schedule_id` before `before` published and `SUCCESS`, as an
/// executor would have: those ticks have run.
async fn ran_before(pool: &PgPool, schedule_id: &str, before: &str) -> Vec<Run> {
    sqlx::query(
        "update schedule_runs set status = 'SUCCESS', published_at = fire_at, \
           updated_at = fire_at where schedule_id = $1 and run_at < $2",
    )
    .bind(schedule_id)
    .bind(ts(before))
    .execute(pool)
    .await
    .expect("mark ran");
    runs_of(pool, schedule_id)
        .await
        .into_iter()
        .filter(|r| r.run_at < ts(before))
        .collect()
}

/// The daily schedule, planned two weeks ahead at T0, its first three ticks run.
async fn daily_that_ran(pool: &PgPool) -> Vec<Run> {
    put_calendar(pool, T0, &[]).await;
    upsert(pool, T0, daily()).await;
    drain(&two_week_planner(pool, T0)).await;
    let ran = ran_before(pool, "daily", T1).await;
    assert_eq!(ran.len(), 3, "5, 6 and 7 January at 09:00: {ran:?}");
    ran
}

/// What [`edit_never_refires_nor_fires_the_old_spec`] changes at T1.
enum Edit {
    Cron,
    Jitter,
    Zone,
    Calendar,
}

/// The schedule's timetable after the edit, with the calendar's exclusion applied.
fn ticks_after_edit(edit: &Edit, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let (cron_expr, zone) = match edit {
        Edit::Cron => ("30 9 * * *", "UTC"),
        Edit::Zone => ("0 9 * * *", "America/New_York"),
        Edit::Jitter | Edit::Calendar => ("0 9 * * *", "UTC"),
    };
    let timetable: Timetable = timetable(cron_expr, zone, ts(T0));
    ticks(&timetable, from, to)
        .into_iter()
        .filter(|t| !matches!(edit, Edit::Calendar) || *t != ts("2026-01-09T09:00:00Z"))
        .collect()
}

/// Plans at T0, runs the ticks before T1, edits at T1, plans at T1 and T2; then the ticks
/// that ran are still one `SUCCESS` row each, nothing before T1 was planned again, and every
/// unpublished run left is a tick of the edited schedule, each of them planned.
async fn edit_never_refires_nor_fires_the_old_spec(edit: Edit) {
    let db = TestDb::new().await;
    let pool = &db.pool();
    let ran = daily_that_ran(pool).await;
    match edit {
        Edit::Cron => {
            upsert(pool, T1, input_with(|i| i.cron_expr = "30 9 * * *".into())).await;
        }
        Edit::Jitter => {
            upsert(pool, T1, input_with(|i| i.jitter_ms = Some(600_000))).await;
        }
        Edit::Zone => {
            upsert(
                pool,
                T1,
                input_with(|i| i.timezone = "America/New_York".into()),
            )
            .await;
        }
        Edit::Calendar => put_calendar(pool, T1, &["2026-01-06", "2026-01-09"]).await,
    }
    drain(&two_week_planner(pool, T1)).await;
    drain(&two_week_planner(pool, T2)).await;

    let runs = runs_of(pool, "daily").await;
    let before_edit: Vec<&Run> = runs.iter().filter(|r| r.run_at < ts(T1)).collect();
    assert_eq!(
        before_edit
            .iter()
            .map(|r| (r.idempotency_key.clone(), r.status))
            .collect::<Vec<_>>(),
        ran.iter()
            .map(|r| (r.idempotency_key.clone(), RunStatus::Success))
            .collect::<Vec<_>>(),
        "a tick that ran is never planned or fired again"
    );
    let live: Vec<DateTime<Utc>> = runs
        .iter()
        .filter(|r| r.status == RunStatus::Pending)
        .map(|r| r.run_at)
        .collect();
    let wanted = ticks_after_edit(&edit, ts(T1), ts(T2) + Duration::days(14));
    assert_eq!(
        live, wanted,
        "every run that can still fire is a tick of the edited schedule, and every such tick is planned"
    );
    let old_spec_left: Vec<DateTime<Utc>> = runs
        .iter()
        .filter(|r| r.run_at >= ts(T1) && !wanted.contains(&r.run_at))
        .filter(|r| r.status != RunStatus::Cancelled)
        .map(|r| r.run_at)
        .collect();
    assert!(
        old_spec_left.is_empty(),
        "a tick of the old spec can still fire: {old_spec_left:?}"
    );
    all_keys(pool).await;
}

fn input_with(change: impl FnOnce(&mut ScheduleInput)) -> ScheduleInput {
    let mut input = daily();
    change(&mut input);
    input
}

/// dagster#13597: after a schedule's cron was edited, Dagster ran a tick that had already
/// run. Here the ticks that ran stay one row each, and the old spec's ticks are cancelled.
#[tokio::test]
async fn dagster_13597_cron_edit_never_refires_a_ran_tick() {
    edit_never_refires_nor_fires_the_old_spec(Edit::Cron).await;
}

/// dagster#13597, with the jitter edited instead of the cron.
#[tokio::test]
async fn dagster_13597_jitter_edit_never_refires_a_ran_tick() {
    edit_never_refires_nor_fires_the_old_spec(Edit::Jitter).await;
}

/// dagster#13597, with the zone edited instead of the cron.
#[tokio::test]
async fn dagster_13597_zone_edit_never_refires_a_ran_tick() {
    edit_never_refires_nor_fires_the_old_spec(Edit::Zone).await;
}

/// dagster#13597, with the schedule's named calendar edited: it now excludes a date whose
/// tick ran (6 January) and one still to come (9 January).
#[tokio::test]
async fn dagster_13597_calendar_edit_never_refires_a_ran_tick() {
    edit_never_refires_nor_fires_the_old_spec(Edit::Calendar).await;
}

/// n8n#30607: after a workflow was updated, its old version fired. A deploy of version 4
/// over version 3 at T1: no run that can still fire names version 3, neither the runs
/// planned before the deploy nor those planned after; the runs that ran keep version 3.
#[tokio::test]
async fn n8n_30607_a_deploy_of_version_n_plus_1_never_fires_a_tick_of_version_n() {
    let db = TestDb::new().await;
    let pool = &db.pool();
    let ran = daily_that_ran(pool).await;
    assert!(ran.iter().all(|r| r.version == 3));
    let planned_before = runs_of(pool, "daily").await;
    assert!(
        planned_before
            .iter()
            .any(|r| r.run_at > ts(T1) && r.status == RunStatus::Pending),
        "runs were planned ahead under version 3"
    );
    upsert(pool, T1, input_with(|i| i.version = 4)).await;
    drain(&two_week_planner(pool, T1)).await;
    drain(&two_week_planner(pool, T2)).await;
    let runs = runs_of(pool, "daily").await;
    let old: Vec<(DateTime<Utc>, i32)> = runs
        .iter()
        .filter(|r| r.status == RunStatus::Pending && r.version != 4)
        .map(|r| (r.run_at, r.version))
        .collect();
    assert!(
        old.is_empty(),
        "runs that can still fire an old version: {old:?}"
    );
    let kept: Vec<i32> = runs
        .iter()
        .filter(|r| r.status == RunStatus::Success)
        .map(|r| r.version)
        .collect();
    assert_eq!(kept, vec![3, 3, 3], "history keeps the version that ran");
    assert!(
        runs.iter()
            .filter(|r| r.status == RunStatus::Pending)
            .count()
            >= 14
    );
}

/// hatchet#1101: two schedules with the same expression collapsed into one trigger. Two
/// schedules with identical specs, workflow and user each get their own run of every tick,
/// under keys of their own.
#[tokio::test]
async fn hatchet_1101_two_schedules_with_one_spec_each_get_their_own_run_per_tick() {
    let db = TestDb::new().await;
    let pool = &db.pool();
    let now = "2026-03-09T10:00:00Z";
    upsert(pool, now, input("twin-a", "*/10 * * * * *")).await;
    upsert(pool, now, input("twin-b", "*/10 * * * * *")).await;
    drain(&planner(pool, now)).await;
    let a = runs_of(pool, "twin-a").await;
    let b = runs_of(pool, "twin-b").await;
    let expected = ticks(
        &timetable("*/10 * * * * *", "UTC", ts(now)),
        ts(now),
        ts(now) + Duration::seconds(60),
    );
    assert_eq!(a.iter().map(|r| r.run_at).collect::<Vec<_>>(), expected);
    assert_eq!(b.iter().map(|r| r.run_at).collect::<Vec<_>>(), expected);
    let keys = all_keys(pool).await;
    assert_eq!(
        keys.len(),
        2 * expected.len(),
        "one key per schedule and tick"
    );
}

/// dagster#14555: pruning old ticks caused duplicates. Retention deletes the runs that ran
/// (rows and a whole day's partition) and the planner goes on: `next_run_at`, the runs
/// ahead and the ticks that ran are as they were; nothing is planned again.
#[tokio::test]
async fn dagster_14555_retention_and_partition_drops_never_change_which_ticks_fire_next() {
    let db = TestDb::new().await;
    let pool = &db.pool();
    // A partition per day from T0, so the days that ran can be dropped whole.
    kairos_store::partitions::create_ahead(pool, ts(T0), 20)
        .await
        .expect("daily partitions");
    daily_that_ran(pool).await;
    let ahead = |runs: Vec<Run>| -> Vec<(String, DateTime<Utc>, RunStatus)> {
        runs.into_iter()
            .filter(|r| r.run_at >= ts(T1))
            .map(|r| (r.idempotency_key, r.fire_at, r.status))
            .collect()
    };
    let before = ahead(runs_of(pool, "daily").await);
    let next_before = stored(pool, "daily").await.next_run_at;
    let retention = Retention::new(
        pool.clone(),
        RetentionConfig {
            retention: Duration::hours(1),
            audit_retention: Duration::days(365),
            keep_last: 0,
            batch_size: 100,
            max_batches: 10,
            batch_pause: StdDuration::ZERO,
            interval: StdDuration::from_secs(3600),
            partition_days_ahead: 2,
            pinned_now: Some(ts(T1)),
        },
    );
    let report = retention.pass().await.expect("retention pass");
    assert_eq!(
        (report.days_dropped, report.dropped, report.deleted),
        (2, 2, 1),
        "5 and 6 January dropped whole, the run of 7 January deleted: {report:?}"
    );
    assert!(runs_of(pool, "daily")
        .await
        .iter()
        .all(|r| r.run_at >= ts(T1)));
    assert_eq!(stored(pool, "daily").await.next_run_at, next_before);
    drain(&two_week_planner(pool, T1)).await;
    let still = ahead(runs_of(pool, "daily").await);
    assert_eq!(
        still[..before.len()],
        before[..],
        "the runs ahead are as they were"
    );
    drain(&two_week_planner(pool, T2)).await;
    let after = runs_of(pool, "daily").await;
    assert!(
        after.iter().all(|r| r.run_at >= ts(T1)),
        "a pruned tick was planned again: {after:?}"
    );
    let planned: Vec<DateTime<Utc>> = after.iter().map(|r| r.run_at).collect();
    let wanted = ticks(
        &timetable("0 9 * * *", "UTC", ts(T0)),
        ts(T1),
        ts(T2) + Duration::days(14),
    );
    assert_eq!(planned, wanted, "every tick ahead once, none behind");
}

/// n8n#30607 when a dispatcher round already holds the run: a round pre-stages a run of
/// version 1 and holds it until its tick; a deploy of version 2 answers meanwhile (it skips
/// the held run), and the round, bringing the run in line before it publishes, launches
/// version 2: in the row and in the launch message.
#[tokio::test]
async fn n8n_30607_a_run_held_by_a_round_launches_the_version_deployed_meanwhile() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    db.store_workflow("wf", 2).await;
    let pool = db.pool();
    let (server, launcher) = dispatcher_support::nats().await;
    let registrar = Registrar::new(pool.clone(), Settings::default());
    let mut schedule = input("held", "* * * * * *");
    schedule.version = 1;
    registrar.upsert(&schedule).await.expect("upsert");
    let key = dispatcher_support::key(1);
    dispatcher_support::run(&pool, &key, "held", 6.0).await;
    let mut config = dispatcher_support::config();
    config.prestage = StdDuration::from_secs(12);
    let dispatcher = Dispatcher::new(pool.clone(), launcher, config);
    let round = tokio::spawn(async move { dispatcher.round().await.expect("round") });
    dispatcher_support::until(
        StdDuration::from_secs(5),
        "the round to hold the run",
        || {
            let (pool, key) = (pool.clone(), key.clone());
            async move {
                let held: Vec<String> = sqlx::query_scalar(
                    "select idempotency_key from schedule_runs where idempotency_key = $1 \
                   and xmax::text::bigint <> 0 \
                   and txid_status(xmax::text::bigint) = 'in progress'",
                )
                .bind(&key)
                .fetch_all(&pool)
                .await
                .expect("probe");
                !held.is_empty()
            }
        },
    )
    .await;

    schedule.version = 2;
    registrar.upsert(&schedule).await.expect("deploy version 2");
    let round = round.await.expect("join");
    assert_eq!(round.enqueued, 1, "{round:?}");
    assert_eq!(
        dispatcher_support::field(&pool, &key, "version")
            .await
            .as_deref(),
        Some("2")
    );
    let reader = dispatcher_support::launcher(&server).await;
    let messages = read_stream(&reader, "KAIROS_LAUNCH")
        .await
        .expect("read the launch stream");
    assert_eq!(messages.len(), 1);
    let body: serde_json::Value =
        serde_json::from_slice(&messages[0].payload).expect("a JSON launch message");
    assert_eq!(body["version"], 2, "{body}");
}
