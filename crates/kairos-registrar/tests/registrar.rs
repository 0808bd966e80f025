//! Registrar behaviour against a real PostgreSQL (one database per test): next_run_at,
//! revisions and concurrency, run reconciliation on reschedule/pause/resume/delete, and the
//! deploy sync's all-or-nothing set semantics.

use chrono::{DateTime, Duration, Utc};
use kairos_core::{jitter_offset, RunKey, RunSource, RunStatus};
use kairos_registrar::{DagLimit, Error, Registrar, ScheduleInput, Settings, WorkflowInput};
use kairos_store::runs::{self, NewRun};
use kairos_store::schedules;
use kairos_store::PgPool;
use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use serde_json::json;

fn ts(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("test timestamp")
        .with_timezone(&Utc)
}

fn registrar(pool: PgPool, now: &str) -> Registrar {
    Registrar::new(
        pool,
        Settings {
            pinned_now: Some(ts(now)),
            ..Settings::default()
        },
    )
}

fn input(id: &str, cron: &str) -> ScheduleInput {
    ScheduleInput {
        schedule_id: Some(id.to_string()),
        workflow_id: "wf".into(),
        version: 1,
        user_id: "u1".into(),
        cron_expr: cron.into(),
        timezone: "America/New_York".into(),
        ..ScheduleInput::default()
    }
}

async fn plant(pool: &PgPool, schedule_id: &str, run_at: &str) -> String {
    let run_at = ts(run_at);
    let key = RunKey::tick(schedule_id, run_at);
    let run = NewRun {
        idempotency_key: key.as_str().to_string(),
        schedule_id: schedule_id.into(),
        run_at,
        fire_at: run_at,
        status: RunStatus::Pending,
        source: RunSource::Schedule,
        overlap: None,
        workflow_id: "wf".into(),
        version: 1,
        user_id: "u1".into(),
    };
    assert!(runs::insert(pool, &run, run_at).await.expect("insert run"));
    key.as_str().to_string()
}

async fn status_of(pool: &PgPool, key: &str) -> (RunStatus, Option<String>, DateTime<Utc>) {
    let run = kairos_store::runs::get(pool, key)
        .await
        .expect("read run")
        .expect("run exists");
    (run.status, run.reason, run.fire_at)
}

#[tokio::test]
async fn upsert_computes_next_run_at_in_the_zone_and_from_start_at() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let reg = registrar(pool, "2026-03-08T12:00:00Z");
    // US DST began 2026-03-08: 07:00 EDT is 11:00Z.
    let created = reg.upsert(&input("s1", "0 7 * * *")).await.expect("upsert");
    assert!(created.created);
    assert_eq!(
        created.schedule.next_run_at,
        Some(ts("2026-03-09T11:00:00Z"))
    );
    assert_eq!(created.schedule.revision, 1);
    let mut later = input("s2", "0 7 * * *");
    later.start_at = Some(ts("2026-04-01T00:00:00Z"));
    let stored = reg
        .upsert(&later)
        .await
        .expect("upsert with start_at")
        .schedule;
    assert_eq!(stored.next_run_at, Some(ts("2026-04-01T11:00:00Z")));
}

#[tokio::test]
async fn same_body_again_changes_nothing_and_a_change_bumps_the_revision() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let reg = registrar(pool.clone(), "2026-03-08T12:00:00Z");
    let first = reg
        .upsert(&input("s1", "0 7 * * *"))
        .await
        .expect("create")
        .schedule;
    let again = reg
        .upsert(&input("s1", " 0 7 * * * "))
        .await
        .expect("same again");
    assert!(!again.created);
    assert_eq!(again.schedule, first, "an identical upsert writes nothing");
    let mut changed = input("s1", "0 7 * * *");
    changed.priority = Some(5);
    let changed = reg.upsert(&changed).await.expect("change").schedule;
    assert_eq!((changed.revision, changed.priority), (2, 5));
    assert_eq!(
        changed.next_run_at, first.next_run_at,
        "a non-timing change keeps next_run_at"
    );
    let mut stale = input("s1", "0 8 * * *");
    stale.revision = Some(1);
    assert!(matches!(
        reg.upsert(&stale).await,
        Err(Error::Conflict { .. })
    ));
    let stored = schedules::get(&pool, "s1")
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(
        (stored.cron_expr.as_str(), stored.revision),
        ("0 7 * * *", 2)
    );
}

#[tokio::test]
async fn derived_schedule_ids_are_deterministic() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let reg = registrar(pool, "2026-03-08T12:00:00Z");
    let mut no_id = input("x", "0 7 * * *");
    no_id.schedule_id = None;
    let a = reg.upsert(&no_id).await.expect("first").schedule;
    let b = reg.upsert(&no_id).await.expect("second");
    assert!(
        !b.created,
        "the same workflow, spec and zone name the same schedule"
    );
    assert_eq!(a.schedule_id, b.schedule.schedule_id);
    assert!(a.schedule_id.starts_with("wf-") && a.schedule_id.len() == 19);
    let long = "w".repeat(200);
    let derived = kairos_registrar::derived_schedule_id(&long, "0 7 * * *", "UTC");
    assert_eq!(derived.len(), 200);
}

#[tokio::test]
async fn concurrent_upserts_of_one_schedule_leave_one_clean_winner() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let reg = registrar(pool.clone(), "2026-03-08T12:00:00Z");
    reg.upsert(&input("s1", "0 7 * * *")).await.expect("create");
    let crons: Vec<String> = (0..8).map(|h| format!("0 {} * * *", h + 10)).collect();
    let tasks: Vec<_> = crons
        .iter()
        .map(|cron| {
            let (reg, mut body) = (reg.clone(), input("s1", cron));
            body.revision = Some(1);
            tokio::spawn(async move { reg.upsert(&body).await })
        })
        .collect();
    let mut winners = Vec::new();
    for (task, cron) in tasks.into_iter().zip(&crons) {
        match task.await.expect("task") {
            Ok(done) => winners.push((cron.clone(), done.schedule)),
            Err(Error::Conflict { .. }) => {}
            Err(other) => panic!("unexpected error {other:?}"),
        }
    }
    assert_eq!(
        winners.len(),
        1,
        "exactly one upsert against revision 1 wins"
    );
    let stored = schedules::get(&pool, "s1")
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(
        stored, winners[0].1,
        "the stored row is the winner's, whole"
    );
    assert_eq!(
        (stored.cron_expr.as_str(), stored.revision),
        (winners[0].0.as_str(), 2)
    );
}

#[tokio::test]
async fn rescheduling_cancels_only_runs_that_left_the_timetable() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let reg = registrar(pool.clone(), "2026-03-09T12:00:00Z");
    reg.upsert(&input("s1", "0 * * * *")).await.expect("hourly");
    let past = plant(&pool, "s1", "2026-03-09T11:00:00Z").await;
    let even = plant(&pool, "s1", "2026-03-09T14:00:00Z").await;
    let odd = plant(&pool, "s1", "2026-03-09T13:00:00Z").await;
    let mut two_hourly = input("s1", "0 */2 * * *");
    two_hourly.jitter_ms = Some(30_000);
    let stored = reg.upsert(&two_hourly).await.expect("reschedule").schedule;
    assert_eq!(stored.next_run_at, Some(ts("2026-03-09T12:00:00Z")));
    let (status, reason, _) = status_of(&pool, &odd).await;
    assert_eq!(status, RunStatus::Cancelled);
    assert!(reason.expect("reason").starts_with("rescheduled"));
    let (status, _, fire_at) = status_of(&pool, &even).await;
    assert_eq!(
        status,
        RunStatus::Pending,
        "a tick of the new timetable stays planned"
    );
    let key = RunKey::tick("s1", ts("2026-03-09T14:00:00Z"));
    assert_eq!(
        fire_at,
        ts("2026-03-09T14:00:00Z") + jitter_offset(&key, 30_000)
    );
    assert_eq!(
        status_of(&pool, &past).await.0,
        RunStatus::Pending,
        "a due run of the old spec still fires"
    );
    // Changing back brings the cancelled tick back: the planner could never write its key again.
    reg.upsert(&input("s1", "0 * * * *"))
        .await
        .expect("back to hourly");
    assert_eq!(status_of(&pool, &odd).await.0, RunStatus::Pending);
}

#[tokio::test]
async fn pause_cancels_unpublished_runs_and_resume_plans_from_now() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let reg = registrar(pool.clone(), "2026-03-09T12:00:00Z");
    reg.upsert(&input("s1", "0 * * * *")).await.expect("hourly");
    let due = plant(&pool, "s1", "2026-03-09T11:00:00Z").await;
    let future = plant(&pool, "s1", "2026-03-09T13:00:00Z").await;
    let paused = reg.set_paused("s1", true).await.expect("pause");
    assert!(paused.paused);
    assert_eq!(status_of(&pool, &due).await.0, RunStatus::Cancelled);
    assert_eq!(status_of(&pool, &future).await.0, RunStatus::Cancelled);
    assert_eq!(
        reg.set_paused("s1", true)
            .await
            .expect("pause again")
            .revision,
        paused.revision
    );
    let later = registrar(pool.clone(), "2026-03-09T12:30:00Z");
    let resumed = later.set_paused("s1", false).await.expect("resume");
    assert_eq!(resumed.next_run_at, Some(ts("2026-03-09T13:00:00Z")));
    assert_eq!(
        status_of(&pool, &due).await.0,
        RunStatus::Cancelled,
        "no catch-up of the paused span"
    );
    assert_eq!(
        status_of(&pool, &future).await.0,
        RunStatus::Pending,
        "a future tick comes back"
    );
    assert!(matches!(
        reg.set_paused("nope", true).await,
        Err(Error::NotFound { .. })
    ));
}

#[tokio::test]
async fn delete_keeps_history_and_cancels_pending_runs() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let reg = registrar(pool.clone(), "2026-03-09T12:00:00Z");
    reg.upsert(&input("s1", "0 * * * *")).await.expect("hourly");
    let key = plant(&pool, "s1", "2026-03-09T13:00:00Z").await;
    reg.delete("s1").await.expect("delete");
    assert!(schedules::get(&pool, "s1").await.expect("get").is_none());
    assert_eq!(status_of(&pool, &key).await.0, RunStatus::Cancelled);
    let history = reg.runs("s1", None, None, 10).await.expect("history");
    assert_eq!(history.runs.len(), 1);
    assert!(matches!(
        reg.delete("s1").await,
        Err(Error::NotFound { .. })
    ));
}

#[tokio::test]
async fn clock_rules_reject_never_firing_and_too_frequent_specs() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let settings = Settings {
        pinned_now: Some(ts("2026-03-09T12:00:00Z")),
        min_interval: Duration::seconds(60),
        allowed_zones: Some(vec!["UTC".into(), "America/New_York".into()]),
        ..Settings::default()
    };
    let reg = Registrar::new(pool.clone(), settings);
    let cases = [
        (input("a", "@at 2026-03-01T00:00:00Z"), "cron_expr"),
        (input("b", "*/10 * * * * *"), "cron_expr"),
        (input("c", "@every 30s"), "cron_expr"),
        (
            ScheduleInput {
                timezone: "Europe/Paris".into(),
                ..input("d", "0 7 * * *")
            },
            "timezone",
        ),
        (
            ScheduleInput {
                end_at: Some(ts("2026-03-09T11:00:00Z")),
                ..input("e", "0 7 * * *")
            },
            "cron_expr",
        ),
    ];
    for (body, field) in cases {
        match reg.upsert(&body).await {
            Err(Error::Invalid(problems)) => assert_eq!(problems[0].field, field, "{body:?}"),
            other => panic!("{body:?} gave {other:?}"),
        }
    }
    assert_eq!(schedules::count(&pool).await.expect("count"), 0);
    reg.upsert(&input("ok", "@every 60s"))
        .await
        .expect("exactly min_interval is allowed");
}

fn dag() -> serde_json::Value {
    json!({"nodes": [{"id": "a"}, {"id": "b", "depends_on": ["a"]}]})
}

fn deploy(version: i64, schedules: Vec<ScheduleInput>) -> WorkflowInput {
    WorkflowInput {
        workflow_id: "wf".into(),
        version,
        dag: dag(),
        schedules: Some(schedules),
    }
}

#[tokio::test]
async fn deploy_sync_makes_the_set_exact_or_changes_nothing() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let reg = registrar(pool.clone(), "2026-03-09T12:00:00Z");
    let first = deploy(
        1,
        vec![
            input("a", "0 1 * * *"),
            input("b", "0 2 * * *"),
            input("c", "0 3 * * *"),
        ],
    );
    let done = reg.put_workflow(&first).await.expect("first deploy");
    assert!(done.created);
    assert_eq!(done.schedules.len(), 3);
    let doomed = plant(&pool, "c", "2026-03-10T07:00:00Z").await;
    let mut next: Vec<ScheduleInput> = vec![
        input("a", "0 1 * * *"),
        input("b", "0 5 * * *"),
        input("d", "0 4 * * *"),
    ];
    for one in &mut next {
        one.version = 2;
    }
    let done = reg
        .put_workflow(&deploy(2, next.clone()))
        .await
        .expect("second deploy");
    assert_eq!(done.removed, vec!["c".to_string()]);
    assert_eq!(status_of(&pool, &doomed).await.0, RunStatus::Cancelled);
    let ids: Vec<String> = reg
        .list(&filter("wf"))
        .await
        .expect("list")
        .schedules
        .into_iter()
        .map(|s| s.schedule_id)
        .collect();
    assert_eq!(ids, ["a", "b", "d"]);
    // One bad schedule in the set: nothing of the third deploy is stored.
    let mut bad = next.clone();
    for one in &mut bad {
        one.version = 3;
    }
    bad[0].cron_expr = "0 9 * * *".into();
    bad.push(ScheduleInput {
        version: 3,
        ..input("e", "61 * * * *")
    });
    match reg.put_workflow(&deploy(3, bad)).await {
        Err(Error::Invalid(problems)) => assert_eq!(problems[0].field, "schedules[3].cron_expr"),
        other => panic!("expected invalid, got {other:?}"),
    }
    let a = schedules::get(&pool, "a")
        .await
        .expect("get")
        .expect("a stays");
    assert_eq!((a.cron_expr.as_str(), a.version), ("0 1 * * *", 2));
    assert!(schedules::get(&pool, "e").await.expect("get").is_none());
    assert!(matches!(
        reg.get_workflow("wf", 3).await,
        Err(Error::NotFound { .. })
    ));
}

#[tokio::test]
async fn workflow_versions_are_immutable() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let reg = registrar(pool, "2026-03-09T12:00:00Z");
    let body = WorkflowInput {
        workflow_id: "wf".into(),
        version: 1,
        dag: dag(),
        schedules: None,
    };
    assert!(reg.put_workflow(&body).await.expect("store").created);
    assert!(!reg.put_workflow(&body).await.expect("same again").created);
    let other = WorkflowInput {
        dag: json!({"nodes": [{"id": "z"}]}),
        ..body.clone()
    };
    assert!(matches!(
        reg.put_workflow(&other).await,
        Err(Error::Conflict { .. })
    ));
    assert_eq!(reg.get_workflow("wf", 1).await.expect("get").dag, dag());
    let cycle = WorkflowInput {
        version: 2,
        dag: json!({"nodes": [{"id": "a", "depends_on": ["b"]}, {"id": "b", "depends_on": ["a"]}]}),
        ..body
    };
    match reg.put_workflow(&cycle).await {
        Err(Error::Invalid(problems)) => assert_eq!(problems[0].field, "dag"),
        other => panic!("expected invalid, got {other:?}"),
    }
}

fn filter(workflow_id: &str) -> kairos_store::schedules::ListFilter {
    kairos_store::schedules::ListFilter {
        workflow_id: Some(workflow_id.into()),
        limit: 100,
        ..Default::default()
    }
}

#[tokio::test]
async fn a_dag_with_nul_characters_is_refused_and_nothing_is_stored() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let reg = registrar(pool.clone(), "2026-03-09T12:00:00Z");
    let dags = [
        json!({"nodes": [{"id": "a", "action": "run\u{0}.sh"}]}),
        json!({"nodes": [{"id": "a", "params": {"k\u{0}ey": 1}}]}),
        json!({"nodes": [{"id": "a", "params": [["deep\u{0}"]]}]}),
    ];
    for (version, dag) in (1..).zip(dags) {
        let body = WorkflowInput {
            workflow_id: "wf".into(),
            version,
            dag: dag.clone(),
            schedules: None,
        };
        match reg.put_workflow(&body).await {
            Err(Error::Invalid(problems)) => {
                assert_eq!(problems[0].field, "dag", "{dag}");
                assert!(problems[0].rule.contains("NUL"), "{:?}", problems[0]);
            }
            other => panic!("{dag}: expected invalid, got {other:?}"),
        }
    }
    let stored: i64 = sqlx::query_scalar("select count(*) from workflows")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(stored, 0);
}

/// A valid DAG whose compact JSON is at least `bytes` long.
fn dag_of_size(bytes: usize) -> serde_json::Value {
    let padding = "p".repeat(1000);
    let nodes: Vec<_> = (0..bytes / 1000 + 1)
        .map(|n| json!({"id": format!("n{n}"), "padding": padding}))
        .collect();
    json!({ "nodes": nodes })
}

fn json_len(value: &serde_json::Value) -> usize {
    serde_json::to_vec(value).expect("json").len()
}

#[tokio::test]
async fn a_dag_over_the_default_nats_payload_is_refused_at_deploy() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let reg = registrar(pool.clone(), "2026-03-09T12:00:00Z");
    let dag = dag_of_size(1_200_000);
    let size = json_len(&dag);
    let body = WorkflowInput {
        workflow_id: "wf".into(),
        version: 1,
        dag,
        schedules: None,
    };
    match reg.put_workflow(&body).await {
        Err(Error::Invalid(problems)) => {
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert_eq!(problems[0].field, "dag");
            let rule = &problems[0].rule;
            assert!(rule.contains(&format!("is {size} bytes")), "{rule}");
            assert!(rule.contains("(1048576 bytes)"), "{rule}");
            assert!(rule.contains("at most 1046528 bytes"), "{rule}");
        }
        other => panic!("expected invalid, got {other:?}"),
    }
    let stored: i64 = sqlx::query_scalar("select count(*) from workflows")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(stored, 0);
}

#[tokio::test]
async fn the_dag_limit_follows_the_servers_max_payload_through_the_shared_handle() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let reg = registrar(pool, "2026-03-09T12:00:00Z");
    // Set after the registrar was built: the handle in its settings is shared.
    let limit = reg.settings().dag_limit.clone();
    limit.set_from_max_payload(8 * 1024);
    assert_eq!(limit.max_payload(), 8 * 1024);
    assert_eq!(limit.get(), 8 * 1024 - DagLimit::LAUNCH_ENVELOPE_HEADROOM);
    let big = dag_of_size(limit.get() + 1);
    let body = |version: i64, dag: serde_json::Value| WorkflowInput {
        workflow_id: "wf".into(),
        version,
        dag,
        schedules: None,
    };
    match reg.put_workflow(&body(1, big)).await {
        Err(Error::Invalid(problems)) => {
            assert_eq!(problems[0].field, "dag");
            assert!(problems[0].rule.contains("(8192 bytes)"), "{problems:?}");
        }
        other => panic!("expected invalid, got {other:?}"),
    }
    let fits = dag_of_size(4000);
    assert!(json_len(&fits) <= limit.get());
    assert!(
        reg.put_workflow(&body(2, fits))
            .await
            .expect("fits")
            .created
    );
}

/// A registrar with `min_interval` of `seconds`, "now" pinned to `now`.
fn with_min_interval(pool: PgPool, now: &str, seconds: i64) -> Registrar {
    Registrar::new(
        pool,
        Settings {
            pinned_now: Some(ts(now)),
            min_interval: Duration::seconds(seconds),
            ..Settings::default()
        },
    )
}

#[tokio::test]
async fn min_interval_is_checked_against_the_real_minimum_gap_of_the_spec() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let reg = with_min_interval(pool.clone(), "2026-03-09T12:00:00Z", 300);
    // The 50 -> 51 gap is the 7th tick of the day: past the first few ticks.
    match reg
        .upsert(&input("late-gap", "0 0,10,20,30,40,50,51 0 * * *"))
        .await
    {
        Err(Error::Invalid(problems)) => {
            assert_eq!(problems[0].field, "cron_expr");
            let rule = &problems[0].rule;
            assert!(rule.contains("60s apart"), "{rule}");
            assert!(
                rule.contains("00:50:00") && rule.contains("00:51:00"),
                "{rule}"
            );
            assert!(rule.contains("min_interval 300s"), "{rule}");
        }
        other => panic!("expected invalid, got {other:?}"),
    }
    let reg = with_min_interval(pool.clone(), "2026-03-09T12:00:00Z", 3 * 3600);
    // 23:00 -> 01:00 only across midnight, and no two consecutive days match: 22 h apart.
    reg.upsert(&input("mondays", "0 23,1 * * MON"))
        .await
        .expect("the real minimum gap is 22 h");
    match reg.upsert(&input("nightly", "0 23,1 * * *")).await {
        Err(Error::Invalid(problems)) => {
            assert_eq!(problems[0].field, "cron_expr");
            assert!(problems[0].rule.contains("7200s apart"), "{problems:?}");
        }
        other => panic!("expected invalid, got {other:?}"),
    }
    assert_eq!(schedules::count(&pool).await.expect("count"), 1);
}

#[tokio::test]
async fn min_interval_compares_wall_clock_gaps_across_dst() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    // US DST begins 2026-03-08: 01:00 EST -> 03:00 EDT is one real hour that day, two on
    // the wall clock. The check is on wall-clock gaps (see input::first_tick), so it passes.
    let reg = with_min_interval(pool, "2026-03-07T12:00:00Z", 2 * 3600);
    let upserted = reg
        .upsert(&input("around-dst", "0 1,3 * * *"))
        .await
        .expect("wall-clock gap is 2 h");
    assert_eq!(
        upserted.schedule.next_run_at,
        Some(ts("2026-03-08T06:00:00Z"))
    );
}

#[tokio::test]
async fn a_run_takes_its_schedules_priority_and_follows_a_change_until_published() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let reg = registrar(pool.clone(), "2026-03-08T12:00:00Z");
    let mut high = input("s1", "0 7 * * *");
    high.priority = Some(3);
    reg.upsert(&high).await.expect("create");
    let pending = plant(&pool, "s1", "2026-03-09T07:00:00Z").await;
    let published = plant(&pool, "s1", "2026-03-10T07:00:00Z").await;
    sqlx::query("update schedule_runs set status = 'ENQUEUED' where idempotency_key = $1")
        .bind(&published)
        .execute(&pool)
        .await
        .expect("publish one");
    let priority = |key: String| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i32>(
                "select priority from schedule_runs where idempotency_key = $1",
            )
            .bind(key)
            .fetch_one(&pool)
            .await
            .expect("priority")
        }
    };
    assert_eq!(
        priority(pending.clone()).await,
        3,
        "written with the schedule's"
    );
    high.priority = Some(7);
    reg.upsert(&high).await.expect("change the priority");
    assert_eq!(
        priority(pending).await,
        7,
        "a run not yet published follows"
    );
    assert_eq!(priority(published).await, 3, "history keeps what it had");
}
