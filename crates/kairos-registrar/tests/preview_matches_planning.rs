//! A preview shows what the planner plans: for random schedules (specs of every kind,
//! zones with DST changes, windows, exclusions, holiday calendars, rolling and DST rules),
//! the ticks `GET /schedules/{id}` previews from the stored row are the ticks the planner's
//! reading of the same schedule (`claim_due` → `Decoder::due` → `ScheduleRules::timetable`)
//! gives, and the first is the `next_run_at` the write stored.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use kairos_core::{Calendars, NamedCalendar};
use kairos_registrar::{CalendarInput, Error, Registrar, RulesInput, ScheduleInput, Settings};
use kairos_store::{calendars, planning, timing::Decoder, Tx};
use kairos_testkit::TestDb;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const NOW: &str = "2026-03-27T10:00:00Z";
const SPECS: [&str; 12] = [
    "0 9 * * *",
    "30 2 * * *",
    "*/20 * * * *",
    "0 0 * * WED",
    "15 1 * * MON-FRI",
    "0 12 L * *",
    "0 8 15W * *",
    "0 6 * * 5#2",
    "*/45 * * * * *",
    "@every 7h",
    "@every 90m",
    "0 30 2 * * SUN",
];
const ZONES: [&str; 5] = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
];
const EXCLUDES: [&str; 5] = [
    "2026-03-30",
    "2026-04-01..2026-04-03",
    "2026-03-29",
    "* * * * SAT",
    "0 0 * * *",
];

/// One random schedule's choices.
#[derive(Debug, Clone)]
struct Case {
    spec: usize,
    zone: usize,
    excludes: Vec<usize>,
    calendars: Vec<bool>,
    roll: usize,
    dst_gap: Option<bool>,
    dst_fold: Option<usize>,
    window: Option<(i64, i64)>,
}

fn cases() -> impl Strategy<Value = Case> {
    (
        0..SPECS.len(),
        0..ZONES.len(),
        proptest::collection::vec(0..EXCLUDES.len(), 0..3),
        proptest::collection::vec(any::<bool>(), 2),
        0..3usize,
        proptest::option::of(any::<bool>()),
        proptest::option::of(0..3usize),
        proptest::option::of((-48i64..48, 1i64..400)),
    )
        .prop_map(
            |(spec, zone, excludes, calendars, roll, dst_gap, dst_fold, window)| Case {
                spec,
                zone,
                excludes,
                calendars,
                roll,
                dst_gap,
                dst_fold,
                window,
            },
        )
}

fn input(id: &str, case: &Case, now: DateTime<Utc>) -> ScheduleInput {
    let calendars: Vec<String> = ["holidays", "closures"]
        .iter()
        .zip(&case.calendars)
        .filter(|(_, on)| **on)
        .map(|(name, _)| (*name).to_string())
        .collect();
    let excludes: Vec<String> = case.excludes.iter().map(|i| EXCLUDES[*i].into()).collect();
    let (start_at, end_at) = match case.window {
        Some((start_h, length_h)) => {
            let start = now + Duration::hours(start_h);
            (Some(start), Some(start + Duration::hours(length_h)))
        }
        None => (None, None),
    };
    ScheduleInput {
        schedule_id: Some(id.into()),
        workflow_id: "wf".into(),
        version: 1,
        user_id: "u".into(),
        cron_expr: SPECS[case.spec].into(),
        timezone: ZONES[case.zone].into(),
        start_at,
        end_at,
        rules: RulesInput {
            exclude: (!excludes.is_empty()).then_some(excludes),
            exclude_calendars: (!calendars.is_empty()).then_some(calendars),
            roll: Some(["none", "forward", "backward"][case.roll].into()),
            dst_gap: case
                .dst_gap
                .map(|shift| if shift { "shift" } else { "skip" }.into()),
            dst_fold: case.dst_fold.map(|i| ["first", "last", "both"][i].into()),
        },
        ..ScheduleInput::default()
    }
}

/// The planner's reading of every stored schedule: its next `count` ticks at or after
/// `now`, by schedule id.
async fn planned(
    registrar: &Registrar,
    now: DateTime<Utc>,
    count: usize,
) -> Vec<(String, Vec<DateTime<Utc>>)> {
    let mut tx = Tx::begin(registrar.pool()).await.expect("begin");
    let far = now + Duration::days(365 * 100);
    let due = planning::claim_due(&mut tx, far, 10_000)
        .await
        .expect("claim");
    let names: Vec<String> = due
        .iter()
        .flat_map(|row| row.rules.exclude_calendars.clone())
        .collect();
    let calendars: Calendars = calendars::dates_of(&mut *tx, &names)
        .await
        .expect("dates")
        .into_iter()
        .map(|(name, dates)| {
            let calendar = NamedCalendar::new(name.clone(), dates).expect("calendar");
            (name, Arc::new(calendar))
        })
        .collect();
    let mut decoder = Decoder::default();
    due.iter()
        .map(|row| {
            let timetable = decoder
                .due(row)
                .expect("decodes")
                .timetable(&calendars)
                .expect("calendars loaded");
            let first = timetable.first_at_or_after(now);
            let rest = first.into_iter().flat_map(|f| timetable.ticks_after(f));
            let ticks = first.into_iter().chain(rest).take(count).collect();
            (row.schedule_id.clone(), ticks)
        })
        .collect()
}

#[test]
fn preview_and_planning_agree_for_random_schedules() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let db = runtime.block_on(TestDb::new());
    runtime.block_on(db.store_workflow("wf", 1));
    let now: DateTime<Utc> = NOW.parse().expect("rfc3339");
    let registrar = Registrar::new(
        db.pool(),
        Settings {
            pinned_now: Some(now),
            ..Settings::default()
        },
    );
    let dates = |days: &[&str]| days.iter().map(|d| (*d).to_string()).collect();
    for (name, days) in [
        (
            "holidays",
            dates(&["2026-03-31", "2026-04-06", "2026-04-07"]),
        ),
        ("closures", dates(&["2026-03-28", "2026-04-02"])),
    ] {
        let calendar = CalendarInput {
            name: name.into(),
            dates: days,
            description: None,
        };
        runtime
            .block_on(registrar.put_calendar(&calendar))
            .expect("calendar");
    }
    let mut runner = TestRunner::new(Config::with_cases(48));
    let compared = std::cell::Cell::new(0usize);
    let result = runner.run(&proptest::collection::vec(cases(), 1..6), |batch| {
        runtime.block_on(async {
            sqlx_clear(&registrar).await;
            let mut stored = Vec::new();
            for (i, case) in batch.iter().enumerate() {
                let id = format!("s{i}");
                match registrar.upsert(&input(&id, case, now)).await {
                    Ok(_) => stored.push(id),
                    // A schedule whose rules leave no tick is refused; nothing to compare.
                    Err(Error::Invalid(_)) => {}
                    Err(err) => panic!("upsert {case:?}: {err}"),
                }
            }
            let planned = planned(&registrar, now, 5).await;
            let mut planned_ids: Vec<&String> = planned.iter().map(|(id, _)| id).collect();
            planned_ids.sort();
            prop_assert_eq!(
                planned_ids,
                stored.iter().collect::<Vec<_>>(),
                "every stored schedule is due"
            );
            for (id, ticks) in &planned {
                let view = registrar.get(id).await.expect("get");
                prop_assert_eq!(&view.preview, ticks, "{} ({})", id, view.schedule.cron_expr);
                prop_assert_eq!(view.schedule.next_run_at, ticks.first().copied());
                compared.set(compared.get() + 1);
            }
            Ok(())
        })
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
    let compared = compared.get();
    assert!(compared >= 48, "only {compared} schedules compared");
}

/// Deletes every schedule, so each case starts from an empty table.
async fn sqlx_clear(registrar: &Registrar) {
    kairos_testkit::sqlx::query("delete from schedules")
        .execute(registrar.pool())
        .await
        .expect("clear");
}
