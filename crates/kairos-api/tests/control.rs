//! Operator control through the router on a real database: chained schedules (`@after`)
//! with their refusals (self-chain, unknown parent, cycle; nothing stored), `max_runs` and
//! `remaining_runs`, pause notes, and dry-runs of an upsert and of a deploy that report what
//! would change and change no row.

use crate::common;

use axum::http::{Method, StatusCode};
use axum::Router;
use common::*;
use kairos_core::{RunKey, RunSource, RunStatus};
use kairos_store::runs::{self, NewRun};
use kairos_store::PgPool;
use kairos_testkit::{sqlx, TestDb};
use serde_json::{json, Value};

const NOW: &str = "2026-03-08T12:00:00Z";

/// Every row of every table a registrar write touches, as text: equal before and after
/// means nothing changed.
async fn snapshot(pool: &PgPool) -> Vec<String> {
    let mut tables = Vec::new();
    for table in [
        "schedules",
        "schedule_runs",
        "workflows",
        "schedule_calendars",
        "run_attempts",
    ] {
        let rows: String = sqlx::query_scalar(&format!(
            "select coalesce(json_agg(t order by t::text), '[]')::text from {table} t"
        ))
        .fetch_one(pool)
        .await
        .expect("snapshot");
        tables.push(rows);
    }
    tables
}

fn body(id: &str, cron_expr: &str) -> Value {
    json!({
        "schedule_id": id, "workflow_id": "wf", "version": 1, "user_id": "u",
        "cron_expr": cron_expr, "timezone": "UTC",
    })
}

async fn upsert(api: &Router, body: Value) -> (StatusCode, Value) {
    let (status, _, answer) = call(
        api,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        Some(body),
    )
    .await;
    (status, answer)
}

async fn get(api: &Router, uri: &str) -> Value {
    let (status, _, answer) = call(api, Method::GET, uri, Some(READER), None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer
}

/// The field and rule of the only problem of a 400.
fn problem(status: StatusCode, answer: &Value) -> (String, String) {
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let errors = answer["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 1, "{answer}");
    (
        errors[0]["field"].as_str().expect("field").to_string(),
        errors[0]["rule"].as_str().unwrap_or_default().to_string()
            + errors[0]["message"].as_str().unwrap_or_default(),
    )
}

#[tokio::test]
async fn self_chains_unknown_parents_and_cycles_are_refused_and_store_nothing() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    deploy_workflow(&api, "wf", 1).await;
    assert_eq!(
        upsert(&api, body("a", "0 * * * *")).await.0,
        StatusCode::CREATED
    );
    assert_eq!(
        upsert(&api, body("b", "@after a")).await.0,
        StatusCode::CREATED
    );
    assert_eq!(
        upsert(&api, body("c", "@after b on always")).await.0,
        StatusCode::CREATED
    );
    let before = snapshot(&pool).await;

    let (status, answer) = upsert(&api, body("a", "@after c on failure")).await;
    let (field, rule) = problem(status, &answer);
    assert_eq!(field, "cron_expr");
    assert!(rule.contains("a → c → b → a"), "{rule}");
    let (status, answer) = upsert(&api, body("d", "@after d")).await;
    let (field, rule) = problem(status, &answer);
    assert_eq!(field, "cron_expr");
    assert!(rule.contains("after itself"), "{rule}");
    let (status, answer) = upsert(&api, body("d", "@after nope")).await;
    let (field, rule) = problem(status, &answer);
    assert_eq!(field, "cron_expr");
    assert!(rule.contains("\"nope\" does not exist"), "{rule}");
    let (status, answer) = upsert(&api, body("d", "@after a on sometimes")).await;
    assert_eq!(problem(status, &answer).0, "cron_expr");

    // A deploy whose schedules chain into each other is refused whole.
    let deploy = json!({
        "dag": {"nodes": [{"id": "n"}]},
        "schedules": [
            {"schedule_id": "x", "user_id": "u", "cron_expr": "@after y", "timezone": "UTC"},
            {"schedule_id": "y", "user_id": "u", "cron_expr": "@after x", "timezone": "UTC"},
        ],
    });
    let (status, _, answer) = call(
        &api,
        Method::PUT,
        "/workflows/wf2/versions/1",
        Some(DEPLOYER),
        Some(deploy),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let fields: Vec<&str> = answer["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| e["field"].as_str().expect("field"))
        .collect();
    assert_eq!(fields, ["schedules[0].cron_expr", "schedules[1].cron_expr"]);
    assert!(answer.to_string().contains("x → y → x"), "{answer}");
    assert_eq!(snapshot(&pool).await, before, "nothing stored");
}

#[tokio::test]
async fn a_chained_schedule_and_its_runs_show_the_chain() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    deploy_workflow(&api, "wf", 1).await;
    upsert(&api, body("a", "0 * * * *")).await;
    upsert(&api, body("b", "@after a on always")).await;
    let b = get(&api, "/schedules/b").await;
    assert_eq!(b["next_run_at"], Value::Null);
    assert_eq!(b["preview"], json!([]));
    assert_eq!(
        b["chain"],
        json!({"parent_schedule_id": "a", "on": "always"})
    );
    assert_eq!(b["waiting_on"], Value::Null);

    // A run of `a` succeeds: `b` gets a run that names it.
    let run_at = ts(NOW);
    let parent = RunKey::tick("a", run_at).as_str().to_string();
    let run = NewRun {
        idempotency_key: parent.clone(),
        schedule_id: "a".into(),
        run_at,
        fire_at: run_at,
        status: RunStatus::Pending,
        source: RunSource::Schedule,
        overlap: None,
        workflow_id: "wf".into(),
        version: 1,
        user_id: "u".into(),
    };
    runs::insert(&pool, &run, run_at).await.expect("insert run");
    sqlx::query(
        "update schedule_runs set status = 'SUCCESS', finished_at = $2 where idempotency_key = $1",
    )
    .bind(&parent)
    .bind(run_at)
    .execute(&pool)
    .await
    .expect("succeed");
    let children = get(&api, "/schedules/b/runs").await;
    let child = &children["runs"][0];
    assert_eq!(child["source"], "chain");
    assert_eq!(child["parent_key"], json!(parent));
    let key = child["idempotency_key"].as_str().expect("key");
    let one = get(&api, &format!("/runs/{key}")).await;
    assert_eq!(one["parent_key"], json!(parent), "{one}");

    // Its parent deleted, the child says why it waits.
    let (status, _, _) = call(&api, Method::DELETE, "/schedules/a", Some(DEPLOYER), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let b = get(&api, "/schedules/b").await;
    assert!(
        b["waiting_on"]
            .as_str()
            .expect("waiting_on")
            .contains("parent schedule \"a\" does not exist"),
        "{b}"
    );
}

#[tokio::test]
async fn max_runs_is_checked_and_shown_with_remaining_runs() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    deploy_workflow(&api, "wf", 1).await;
    let before = snapshot(&pool).await;
    let mut zero = body("m", "0 * * * *");
    zero["max_runs"] = json!(0);
    let (status, answer) = upsert(&api, zero).await;
    let (field, rule) = problem(status, &answer);
    assert_eq!(field, "max_runs");
    assert!(rule.contains("between 1 and"), "{rule}");
    assert_eq!(snapshot(&pool).await, before);

    let mut two = body("m", "0 * * * *");
    two["max_runs"] = json!(2);
    assert_eq!(upsert(&api, two).await.0, StatusCode::CREATED);
    let m = get(&api, "/schedules/m").await;
    assert_eq!(
        (m["max_runs"].clone(), m["remaining_runs"].clone()),
        (json!(2), json!(2))
    );
    let list = get(&api, "/schedules").await;
    assert_eq!(list["schedules"][0]["remaining_runs"], json!(2));
    upsert(&api, body("n", "0 * * * *")).await;
    let n = get(&api, "/schedules/n").await;
    assert_eq!(
        (n["max_runs"].clone(), n["remaining_runs"].clone()),
        (Value::Null, Value::Null)
    );
}

async fn pause(api: &Router, body: Value) -> (StatusCode, Value) {
    let (status, _, answer) = call(
        api,
        Method::POST,
        "/schedules/pause",
        Some(DEPLOYER),
        Some(body),
    )
    .await;
    (status, answer)
}

#[tokio::test]
async fn a_pause_note_shows_until_resume() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    deploy_workflow(&api, "wf", 1).await;
    upsert(&api, body("p", "0 * * * *")).await;
    let before = snapshot(&pool).await;
    let long = "x".repeat(1001);
    let (status, answer) = pause(
        &api,
        json!({"schedule_id": "p", "paused": true, "note": long}),
    )
    .await;
    let (field, rule) = problem(status, &answer);
    assert_eq!(field, "note");
    assert!(rule.contains("1000"), "{rule}");
    assert_eq!(snapshot(&pool).await, before, "nothing stored");

    let note = "database migration until 14:00 — ask ops";
    let (status, _) = pause(
        &api,
        json!({"schedule_id": "p", "paused": true, "note": note}),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let p = get(&api, "/schedules/p").await;
    assert_eq!(
        (p["paused"].clone(), p["pause_note"].clone()),
        (json!(true), json!(note))
    );
    let list = get(&api, "/schedules?paused=true").await;
    assert_eq!(list["schedules"][0]["pause_note"], json!(note));
    // Pausing again with another note replaces it.
    pause(
        &api,
        json!({"schedule_id": "p", "paused": true, "note": "later"}),
    )
    .await;
    assert_eq!(
        get(&api, "/schedules/p").await["pause_note"],
        json!("later")
    );

    let (status, _) = pause(&api, json!({"schedule_id": "p", "paused": false})).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let p = get(&api, "/schedules/p").await;
    assert_eq!(
        (p["paused"].clone(), p["pause_note"].clone()),
        (json!(false), Value::Null)
    );
}

/// Stores the next `n` hourly ticks of `schedule_id` as unpublished planned runs.
async fn planned(pool: &PgPool, schedule_id: &str, n: i64) {
    for i in 1..=n {
        let run_at = ts(NOW) + chrono::Duration::hours(i);
        let run = NewRun {
            idempotency_key: RunKey::tick(schedule_id, run_at).as_str().to_string(),
            schedule_id: schedule_id.into(),
            run_at,
            fire_at: run_at,
            status: RunStatus::Pending,
            source: RunSource::Schedule,
            overlap: None,
            workflow_id: "wf".into(),
            version: 1,
            user_id: "u".into(),
        };
        runs::insert(pool, &run, ts(NOW)).await.expect("insert run");
    }
}

#[tokio::test]
async fn a_dry_run_upsert_reports_the_change_and_changes_no_row() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    deploy_workflow(&api, "wf", 1).await;
    upsert(&api, body("s", "0 * * * *")).await;
    planned(&pool, "s", 3).await;
    let before = snapshot(&pool).await;
    let dry = |b: Value| {
        let api = api.clone();
        async move {
            let (status, _, answer) = call(
                &api,
                Method::POST,
                "/schedules/upsert?dry_run=true",
                Some(DEPLOYER),
                Some(b),
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{answer}");
            answer
        }
    };

    // Every two hours instead of hourly: the odd hours' planned runs would be cancelled.
    let answer = dry(body("s", "0 */2 * * *")).await;
    assert_eq!(answer["dry_run"], json!(true));
    let s = &answer["schedules"][0];
    assert_eq!(s["change"], "updated", "{answer}");
    assert_eq!(
        s["next_fire_times_before"],
        json!([
            "2026-03-08T12:00:00Z",
            "2026-03-08T13:00:00Z",
            "2026-03-08T14:00:00Z",
            "2026-03-08T15:00:00Z",
            "2026-03-08T16:00:00Z"
        ])
    );
    assert_eq!(
        s["next_fire_times_after"],
        json!([
            "2026-03-08T12:00:00Z",
            "2026-03-08T14:00:00Z",
            "2026-03-08T16:00:00Z",
            "2026-03-08T18:00:00Z",
            "2026-03-08T20:00:00Z"
        ])
    );
    assert_eq!(s["runs_cancelled"], json!(2), "13:00 and 15:00");

    let s = &dry(body("s", "0 * * * *")).await["schedules"][0];
    assert_eq!(
        (s["change"].clone(), s["runs_cancelled"].clone()),
        (json!("unchanged"), json!(0))
    );
    let s = &dry(body("new", "30 * * * *")).await["schedules"][0];
    assert_eq!(s["change"], "created");
    assert_eq!(s["next_fire_times_before"], json!([]));
    assert_eq!(s["next_fire_times_after"][0], "2026-03-08T12:30:00Z");
    // A refused change is a 400 in a dry-run too.
    let (status, _, _) = call(
        &api,
        Method::POST,
        "/schedules/upsert?dry_run=true",
        Some(DEPLOYER),
        Some(body("s", "@after s")),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(snapshot(&pool).await, before, "a dry-run changes no row");
}

#[tokio::test]
async fn a_dry_run_deploy_reports_each_schedule_and_changes_no_row() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    let schedule = |id: &str, cron: &str| json!({"schedule_id": id, "user_id": "u", "cron_expr": cron, "timezone": "UTC"});
    let first = json!({
        "dag": {"nodes": [{"id": "n"}]},
        "schedules": [schedule("keep", "0 * * * *"), schedule("change", "0 * * * *"),
                      schedule("drop", "0 * * * *")],
    });
    let (status, _, answer) = call(
        &api,
        Method::PUT,
        "/workflows/wf/versions/1",
        Some(DEPLOYER),
        Some(first),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    planned(&pool, "drop", 2).await;
    let before = snapshot(&pool).await;
    let second = json!({
        "dag": {"nodes": [{"id": "n"}, {"id": "m"}]},
        "schedules": [schedule("keep", "0 * * * *"), schedule("change", "15 * * * *"),
                      schedule("add", "@after keep")],
    });
    let (status, _, answer) = call(
        &api,
        Method::PUT,
        "/workflows/wf/versions/2?dry_run=true",
        Some(DEPLOYER),
        Some(second),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["workflow_created"], json!(true));
    let changes: Vec<(String, String, i64)> = answer["schedules"]
        .as_array()
        .expect("schedules")
        .iter()
        .map(|s| {
            (
                s["schedule_id"].as_str().expect("id").to_string(),
                s["change"].as_str().expect("change").to_string(),
                s["runs_cancelled"].as_i64().expect("n"),
            )
        })
        .collect();
    let expected = [
        ("keep", "updated", 0), // the version moves to 2
        ("change", "updated", 0),
        ("add", "created", 0),
        ("drop", "removed", 2),
    ];
    let expected: Vec<(String, String, i64)> = expected
        .iter()
        .map(|(a, b, n)| (a.to_string(), b.to_string(), *n))
        .collect();
    assert_eq!(changes, expected, "{answer}");
    assert_eq!(
        answer["schedules"][1]["next_fire_times_after"][0],
        "2026-03-08T12:15:00Z"
    );
    assert_eq!(answer["schedules"][2]["next_fire_times_after"], json!([]));
    assert_eq!(answer["schedules"][3]["next_fire_times_after"], json!([]));
    assert_eq!(snapshot(&pool).await, before, "a dry-run changes no row");
}

async fn preview(api: &Router, body: Value) -> Value {
    let (status, _, answer) = call(
        api,
        Method::POST,
        "/schedules/preview",
        Some(READER),
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer
}

#[tokio::test]
async fn an_explained_preview_marks_dst_gap_shifts_repeated_hours_jitter_and_the_window() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    deploy_workflow(&api, "wf", 1).await;
    // New York springs forward on 2026-03-08 at 02:00: 02:30 does not exist that day.
    let gap = preview(
        &api,
        json!({"cron_expr": "30 2 * * *", "timezone": "America/New_York", "count": 2,
               "after": "2026-03-07T12:00:00Z", "explain": true}),
    )
    .await;
    let first = &gap["ticks"][0];
    assert_eq!(first["at"], "2026-03-08T07:00:00Z", "{gap}");
    assert_eq!(first["wall_time"], "2026-03-08T03:00:00");
    assert_eq!(first["utc_offset"], "-04:00");
    assert_eq!(first["dst"]["rule"], "dst_gap=shift");
    assert_eq!(first["dst"]["wall_time"], "2026-03-08T02:30:00");
    let second = &gap["ticks"][1];
    assert_eq!(
        (
            second["wall_time"].clone(),
            second["utc_offset"].clone(),
            second.get("dst")
        ),
        (json!("2026-03-09T02:30:00"), json!("-04:00"), None)
    );

    // It falls back on 2026-11-01 at 02:00: 01:30 happens twice.
    let fold = preview(
        &api,
        json!({"cron_expr": "30 1 * * *", "timezone": "America/New_York", "count": 2,
               "after": "2026-10-31T12:00:00Z", "dst_fold": "both", "explain": true}),
    )
    .await;
    let passes: Vec<(Value, Value, Value)> = fold["ticks"]
        .as_array()
        .expect("ticks")
        .iter()
        .map(|t| {
            (
                t["at"].clone(),
                t["utc_offset"].clone(),
                t["dst"]["occurrence"].clone(),
            )
        })
        .collect();
    assert_eq!(
        passes,
        vec![
            (
                json!("2026-11-01T05:30:00Z"),
                json!("-04:00"),
                json!("first")
            ),
            (
                json!("2026-11-01T06:30:00Z"),
                json!("-05:00"),
                json!("second")
            ),
        ],
        "{fold}"
    );

    // Jitter: the offset the planner gives the schedule's run of each tick.
    let jittered = preview(
        &api,
        json!({"cron_expr": "0 * * * *", "timezone": "UTC", "count": 3, "schedule_id": "s",
               "jitter_ms": 600000, "after": NOW, "end_at": "2026-03-08T15:00:00Z",
               "explain": true}),
    )
    .await;
    for tick in jittered["ticks"].as_array().expect("ticks") {
        let at = ts(tick["at"].as_str().expect("at"));
        let offset = kairos_core::jitter_offset(&RunKey::tick("s", at), 600_000);
        assert_eq!(
            tick["jitter_ms"],
            json!(offset.num_milliseconds()),
            "{tick}"
        );
        assert_eq!(
            tick["fire_at"],
            json!(kairos_registrar::rfc3339(at + offset))
        );
    }
    assert!(
        jittered["ticks"]
            .as_array()
            .expect("ticks")
            .iter()
            .any(|t| t["jitter_ms"] != json!(0)),
        "{jittered}"
    );
    assert_eq!(
        jittered["outside_window"],
        json!([{"at": "2026-03-08T16:00:00Z", "why": "after end_at"}])
    );

    // GET explains a stored schedule's preview on request (the day before the gap).
    let api = router(pool.clone(), "2026-03-07T12:00:00Z");
    let mut stored = body("ny", "30 2 * * *");
    stored["timezone"] = json!("America/New_York");
    upsert(&api, stored).await;
    let plain = get(&api, "/schedules/ny").await;
    assert_eq!(plain.get("explained_preview"), None);
    let explained = get(&api, "/schedules/ny?explain=true").await;
    let first = &explained["explained_preview"][0];
    assert_eq!(first["at"], "2026-03-08T07:00:00Z", "{explained}");
    assert_eq!(first["dst"]["rule"], "dst_gap=shift");
}
