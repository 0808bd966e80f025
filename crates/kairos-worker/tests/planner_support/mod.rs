//! Shared helpers of the planner tests: pinned clocks, schedules written through the
//! registrar (or in bulk through the store), run rows read back, expected ticks from the core.

#![allow(dead_code)]

use kairos_testkit::sqlx;
use std::collections::BTreeSet;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use kairos_core::{parse_zone, FailurePolicy, Run, RunKey, Schedule, Spec, Timetable};
use kairos_registrar::{Registrar, ScheduleInput, Settings};
use kairos_store::runs;
use kairos_store::schedules;
use kairos_store::PgPool;
use kairos_worker::planner::{PassReport, Planner, PlannerConfig};

pub fn ts(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("test timestamp")
        .with_timezone(&Utc)
}

/// Lookahead 60 s, grace 60 s, catch-up 100 (100 per pass), batches of 500, a wake-up for
/// every run written, "now" pinned.
pub fn config(now: Option<DateTime<Utc>>) -> PlannerConfig {
    PlannerConfig {
        tick: StdDuration::from_secs(1),
        lookahead: Duration::seconds(60),
        misfire_grace: Duration::seconds(60),
        max_catchup: 100,
        max_catchup_per_pass: 100,
        batch_size: 500,
        wake_within: Duration::seconds(60),
        pinned_now: now,
    }
}

pub fn planner(pool: &PgPool, now: &str) -> Planner {
    Planner::new(pool.clone(), config(Some(ts(now))))
}

/// Passes until one claims nothing; the reports of the passes that claimed something.
pub async fn drain(planner: &Planner) -> Vec<PassReport> {
    let mut reports = Vec::new();
    loop {
        let report = planner.pass().await.expect("planner pass");
        if report.claimed == 0 {
            return reports;
        }
        reports.push(report);
        assert!(reports.len() < 1000, "the planner does not converge");
    }
}

pub fn registrar(pool: &PgPool, now: &str) -> Registrar {
    Registrar::new(
        pool.clone(),
        Settings {
            pinned_now: Some(ts(now)),
            ..Settings::default()
        },
    )
}

/// A schedule input for workflow `wf` version 3, user `u1`, in UTC.
pub fn input(schedule_id: &str, cron_expr: &str) -> ScheduleInput {
    ScheduleInput {
        schedule_id: Some(schedule_id.into()),
        workflow_id: "wf".into(),
        version: 3,
        user_id: "u1".into(),
        cron_expr: cron_expr.into(),
        timezone: "UTC".into(),
        ..ScheduleInput::default()
    }
}

/// Upserts through the registrar at `now`.
pub async fn upsert(pool: &PgPool, now: &str, input: ScheduleInput) -> Schedule {
    let version = i32::try_from(input.version).expect("a stored version");
    kairos_testkit::store_workflow(pool, &input.workflow_id, version).await;
    registrar(pool, now)
        .upsert(&input)
        .await
        .expect("upsert")
        .schedule
}

/// Writes `n` schedules in one statement, ids `<prefix>-<i>`, each with `next_run_at`.
pub async fn insert_bulk(
    pool: &PgPool,
    prefix: &str,
    n: usize,
    spec: impl Fn(usize) -> (&'static str, &'static str),
    next_run_at: impl Fn(&Timetable) -> Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
) {
    let rows: Vec<Schedule> = (0..n)
        .map(|i| {
            let (cron_expr, timezone) = spec(i);
            let timetable = timetable(cron_expr, timezone, created_at);
            Schedule {
                schedule_id: format!("{prefix}-{i}"),
                workflow_id: "wf".into(),
                version: 1,
                user_id: "u1".into(),
                cron_expr: cron_expr.into(),
                timezone: timezone.into(),
                start_at: None,
                end_at: None,
                next_run_at: next_run_at(&timetable),
                paused: false,
                jitter_ms: 0,
                overlap_policy: "allow".parse().expect("policy"),
                catchup_policy: "none".parse().expect("policy"),
                priority: 0,
                max_run_seconds: None,
                max_queued: None,
                max_in_flight: None,
                failure: FailurePolicy {
                    max_attempts: 1,
                    ..Default::default()
                },
                rules: Default::default(),
                max_runs: None,
                deadline_s: None,
                region: None,
                fallback_regions: Vec::new(),
                scheduled_runs: 0,
                pause_note: None,
                paused_until: None,
                paused_by: None,
                revision: 0,
                created_at,
                updated_at: created_at,
            }
        })
        .collect();
    for chunk in rows.chunks(5_000) {
        let written = schedules::insert_many(pool, chunk, created_at)
            .await
            .expect("insert schedules");
        assert_eq!(written.len(), chunk.len());
    }
}

pub fn timetable(cron_expr: &str, timezone: &str, anchor: DateTime<Utc>) -> Timetable {
    Timetable::new(
        Spec::parse(cron_expr).expect("spec"),
        parse_zone(timezone).expect("zone"),
        anchor,
    )
}

/// The ticks of `timetable` in `[from, to]`.
pub fn ticks(timetable: &Timetable, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let first = timetable.first_at_or_after(from);
    first
        .into_iter()
        .chain(first.into_iter().flat_map(|t| timetable.ticks_after(t)))
        .take_while(|t| *t <= to)
        .collect()
}

/// The keys of the ticks of `timetable` in `[from, to]`.
pub fn tick_keys(
    schedule_id: &str,
    timetable: &Timetable,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> BTreeSet<String> {
    ticks(timetable, from, to)
        .into_iter()
        .map(|t| RunKey::tick(schedule_id, t).as_str().to_string())
        .collect()
}

/// A schedule's runs, oldest tick first.
pub async fn runs_of(pool: &PgPool, schedule_id: &str) -> Vec<Run> {
    let mut runs = runs::list_for_schedule(pool, schedule_id, None, None, 100_000)
        .await
        .expect("runs");
    runs.reverse();
    runs
}

pub async fn run_ats(pool: &PgPool, schedule_id: &str) -> Vec<DateTime<Utc>> {
    runs_of(pool, schedule_id)
        .await
        .into_iter()
        .map(|r| r.run_at)
        .collect()
}

pub async fn stored(pool: &PgPool, schedule_id: &str) -> Schedule {
    schedules::get(pool, schedule_id)
        .await
        .expect("get")
        .expect("schedule exists")
}

/// Every stored key, with the number of rows per key (always 1: the primary key).
pub async fn all_keys(pool: &PgPool) -> BTreeSet<String> {
    let keys: Vec<String> = sqlx::query_scalar("select idempotency_key from schedule_runs")
        .fetch_all(pool)
        .await
        .expect("keys");
    let n = keys.len();
    let set: BTreeSet<String> = keys.into_iter().collect();
    assert_eq!(set.len(), n, "a key is stored twice");
    set
}

/// A second, independent pool on the same test database (another "instance").
pub async fn other_pool(pool: &PgPool) -> PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(pool.connect_options().as_ref().clone())
        .await
        .expect("second pool")
}
