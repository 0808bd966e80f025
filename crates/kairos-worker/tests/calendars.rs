//! Calendars through the registrar and the planner on a real PostgreSQL: exclusions and
//! named calendars keep ticks out of `schedule_runs`, a calendar change cancels and restores
//! the right unpublished runs, two planners never double a rolled tick, and bad calendar
//! input is refused naming the field with nothing stored.

use crate::planner_support;

use chrono::{DateTime, Duration, Utc};
use kairos_core::{Run, RunKey, RunStatus};
use kairos_registrar::{CalendarInput, Error, RulesInput};
use kairos_store::PgPool;
use kairos_testkit::TestDb;
use kairos_worker::planner::{Planner, PlannerConfig};
use planner_support::*;

/// Monday 5 January 2026, midnight UTC.
const NOW: &str = "2026-01-05T00:00:00Z";

/// A planner whose lookahead covers two weeks, so a pass plans many days.
fn two_week_planner(pool: &PgPool) -> Planner {
    Planner::new(
        pool.clone(),
        PlannerConfig {
            lookahead: Duration::days(14),
            ..config(Some(ts(NOW)))
        },
    )
}

fn with_rules(id: &str, cron: &str, rules: RulesInput) -> kairos_registrar::ScheduleInput {
    kairos_registrar::ScheduleInput {
        rules,
        ..input(id, cron)
    }
}

async fn put_calendar(pool: &PgPool, name: &str, dates: &[&str]) -> Vec<String> {
    registrar(pool, NOW)
        .put_calendar(&CalendarInput {
            name: name.into(),
            dates: dates.iter().map(|d| d.to_string()).collect(),
            description: Some("test holidays".into()),
        })
        .await
        .expect("put calendar")
        .replanned
}

fn status_at(runs: &[Run], at: &str) -> Option<RunStatus> {
    runs.iter().find(|r| r.run_at == ts(at)).map(|r| r.status)
}

#[tokio::test]
async fn a_calendar_change_cancels_and_restores_the_right_unpublished_runs() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 3).await;
    let pool = &db.pool();
    put_calendar(pool, "hol", &[]).await;
    let rules = RulesInput {
        exclude_calendars: Some(vec!["hol".into()]),
        exclude: Some(vec!["2026-01-10".into()]),
        ..RulesInput::default()
    };
    upsert(pool, NOW, with_rules("daily", "0 9 * * *", rules)).await;
    drain(&two_week_planner(pool)).await;
    let before = runs_of(pool, "daily").await;
    assert_eq!(
        status_at(&before, "2026-01-07T09:00:00Z"),
        Some(RunStatus::Pending)
    );
    assert_eq!(
        status_at(&before, "2026-01-10T09:00:00Z"),
        None,
        "excluded: never planned"
    );

    // 7 January becomes a holiday: its unpublished run is cancelled, the others stay.
    assert_eq!(
        put_calendar(pool, "hol", &["2026-01-07"]).await,
        vec!["daily".to_string()]
    );
    drain(&two_week_planner(pool)).await;
    let after = runs_of(pool, "daily").await;
    assert_eq!(
        status_at(&after, "2026-01-07T09:00:00Z"),
        Some(RunStatus::Cancelled)
    );
    assert_eq!(
        status_at(&after, "2026-01-06T09:00:00Z"),
        Some(RunStatus::Pending)
    );
    assert_eq!(
        status_at(&after, "2026-01-08T09:00:00Z"),
        Some(RunStatus::Pending)
    );
    assert_eq!(status_at(&after, "2026-01-10T09:00:00Z"), None);

    // And stops being one: the same run (same key) comes back.
    put_calendar(pool, "hol", &[]).await;
    drain(&two_week_planner(pool)).await;
    let restored = runs_of(pool, "daily").await;
    assert_eq!(
        status_at(&restored, "2026-01-07T09:00:00Z"),
        Some(RunStatus::Pending)
    );
    assert_eq!(restored.len(), before.len(), "no run doubled: {restored:?}");
    all_keys(pool).await;
}

#[tokio::test]
async fn a_date_no_longer_excluded_is_planned_after_a_calendar_change() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 3).await;
    let pool = &db.pool();
    put_calendar(pool, "hol", &["2026-01-07"]).await;
    let rules = RulesInput {
        exclude_calendars: Some(vec!["hol".into()]),
        ..RulesInput::default()
    };
    upsert(pool, NOW, with_rules("daily", "0 9 * * *", rules)).await;
    drain(&two_week_planner(pool)).await;
    assert_eq!(
        status_at(&runs_of(pool, "daily").await, "2026-01-07T09:00:00Z"),
        None
    );
    put_calendar(pool, "hol", &[]).await;
    drain(&two_week_planner(pool)).await;
    assert_eq!(
        status_at(&runs_of(pool, "daily").await, "2026-01-07T09:00:00Z"),
        Some(RunStatus::Pending)
    );
}

#[tokio::test]
async fn two_planners_never_double_a_rolled_tick() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 3).await;
    let pool = &db.pool();
    put_calendar(pool, "hol", &["2026-01-12"]).await;
    for i in 0..20 {
        let rules = RulesInput {
            exclude: Some(vec!["* * * * SAT,SUN".into()]),
            exclude_calendars: Some(vec!["hol".into()]),
            roll: Some("forward".into()),
            ..RulesInput::default()
        };
        upsert(
            pool,
            NOW,
            with_rules(&format!("biz-{i}"), "0 9 * * *", rules),
        )
        .await;
    }
    let other = other_pool(pool).await;
    let (a, b) = (two_week_planner(pool), two_week_planner(&other));
    tokio::join!(drain(&a), drain(&b));
    tokio::join!(drain(&a), drain(&b));
    all_keys(pool).await;
    for i in 0..20 {
        let id = format!("biz-{i}");
        let run_ats = run_ats(pool, &id).await;
        // Mon 5 .. Fri 9, then Sat 10, Sun 11 and the holiday Mon 12 roll onto Tue 13.
        let expected: Vec<DateTime<Utc>> = [5, 6, 7, 8, 9, 13, 14, 15, 16]
            .iter()
            .map(|d| ts(&format!("2026-01-{d:02}T09:00:00Z")))
            .collect();
        assert_eq!(run_ats, expected, "{id}");
        let keys: Vec<String> = runs_of(pool, &id)
            .await
            .into_iter()
            .map(|r| r.idempotency_key)
            .collect();
        let from_instants: Vec<String> = expected
            .iter()
            .map(|at| RunKey::tick(&id, *at).as_str().to_string())
            .collect();
        assert_eq!(
            keys, from_instants,
            "a rolled tick is keyed on the instant it fires at"
        );
    }
}

fn fields(err: Error) -> Vec<String> {
    match err {
        Error::Invalid(problems) => problems.into_iter().map(|p| p.field).collect(),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_calendar_input_is_refused_naming_the_field_and_nothing_is_stored() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 3).await;
    let pool = &db.pool();
    let registrar = registrar(pool, NOW);
    let cases: Vec<(&str, RulesInput, &str)> = vec![
        (
            "0 9 * * *",
            RulesInput {
                exclude: Some(vec!["2026-02-30".into()]),
                ..Default::default()
            },
            "exclude[0]",
        ),
        (
            "0 9 * * *",
            RulesInput {
                exclude: Some(vec!["2026-12-26..2026-12-24".into()]),
                ..Default::default()
            },
            "exclude[0]",
        ),
        (
            "0 9 * * *",
            RulesInput {
                exclude_calendars: Some(vec!["nope".into()]),
                ..Default::default()
            },
            "exclude_calendars[0]",
        ),
        (
            "0 9 * * *",
            RulesInput {
                exclude: Some(vec!["* * * * *".into()]),
                ..Default::default()
            },
            "exclude",
        ),
        (
            "0 9 * * *",
            RulesInput {
                exclude: Some(vec!["2026-01-01..2027-12-31".into()]),
                roll: Some("forward".into()),
                ..Default::default()
            },
            "roll",
        ),
        (
            "0 9 * * *",
            RulesInput {
                roll: Some("sideways".into()),
                ..Default::default()
            },
            "roll",
        ),
        (
            "0 9 * * *",
            RulesInput {
                dst_fold: Some("middle".into()),
                ..Default::default()
            },
            "dst_fold",
        ),
        (
            "@every 1h",
            RulesInput {
                dst_gap: Some("skip".into()),
                ..Default::default()
            },
            "dst_gap",
        ),
    ];
    for (cron, rules, field) in cases {
        let err = registrar
            .upsert(&with_rules("bad", cron, rules.clone()))
            .await
            .expect_err(field);
        assert_eq!(fields(err), vec![field.to_string()], "{rules:?}");
    }
    assert_eq!(
        kairos_store::schedules::count(pool).await.expect("count"),
        0
    );

    let too_many: Vec<String> = (0..10_001)
        .map(|d| {
            (ts("2000-01-01T00:00:00Z") + Duration::days(d))
                .format("%Y-%m-%d")
                .to_string()
        })
        .collect();
    let err = registrar
        .put_calendar(&CalendarInput {
            name: "big".into(),
            dates: too_many,
            description: None,
        })
        .await
        .expect_err("too many dates");
    assert_eq!(fields(err), vec!["dates".to_string()]);
    let err = registrar
        .put_calendar(&CalendarInput {
            name: "bad".into(),
            dates: vec!["2026-13-01".into()],
            description: None,
        })
        .await
        .expect_err("bad date");
    assert_eq!(fields(err), vec!["dates[0]".to_string()]);
    assert!(registrar.list_calendars().await.expect("list").is_empty());
}

#[tokio::test]
async fn a_calendar_in_use_cannot_be_deleted_nor_made_to_remove_every_tick() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 3).await;
    let pool = &db.pool();
    let registrar = registrar(pool, NOW);
    put_calendar(pool, "hol", &[]).await;
    let rules = RulesInput {
        exclude_calendars: Some(vec!["hol".into()]),
        ..RulesInput::default()
    };
    upsert(pool, NOW, with_rules("yearly", "0 9 7 1 *", rules)).await;
    // Every 7 January until 2199: the schedule would never fire again. Refused, unchanged.
    let every_year: Vec<String> = (2026..=2199).map(|y| format!("{y}-01-07")).collect();
    let err = registrar
        .put_calendar(&CalendarInput {
            name: "hol".into(),
            dates: every_year,
            description: None,
        })
        .await
        .expect_err("never fires");
    assert_eq!(fields(err), vec!["dates".to_string()]);
    assert!(registrar
        .get_calendar("hol")
        .await
        .expect("get")
        .dates
        .is_empty());

    let err = registrar.delete_calendar("hol").await.expect_err("in use");
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    registrar.delete("yearly").await.expect("delete schedule");
    registrar
        .delete_calendar("hol")
        .await
        .expect("delete calendar");
    assert!(matches!(
        registrar.get_calendar("hol").await,
        Err(Error::NotFound { .. })
    ));
}
