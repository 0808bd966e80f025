//! Run deadlines through the API on a real database: `deadline_s` is checked (a 400 naming
//! it, nothing written), stored and shown by `GET /schedules/{id}`, whose explained preview
//! gives each next fire time's deadline; `GET /runs?late=true` lists the runs the sweep's
//! statement marked late, newest mark first, paged and filtered, and refuses anything but
//! `late=true`.

use crate::common;

use axum::http::{Method, StatusCode};
use common::{call, router, ts, DEPLOYER, READER};
use kairos_core::{RunKey, RunSource, RunStatus};
use kairos_store::runs::{self, NewRun};
use kairos_store::{deadlines, PgPool};
use kairos_testkit::{sqlx, TestDb};
use serde_json::{json, Value};

const NOW: &str = "2026-03-05T12:00:00Z";

fn schedule(id: &str, deadline_s: Value) -> Value {
    json!({"schedule_id": id, "workflow_id": "wa", "version": 1, "user_id": "u1",
           "cron_expr": "0 7 * * *", "timezone": "UTC", "deadline_s": deadline_s})
}

async fn upsert(api: &axum::Router, body: Value) -> (StatusCode, Value) {
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

/// A run of `schedule_id` at `at` with a deadline `deadline_s` after it, in `status`.
async fn run(pool: &PgPool, schedule_id: &str, at: &str, deadline_s: Option<i32>) -> String {
    let key = RunKey::tick(schedule_id, ts(at)).as_str().to_string();
    let new = NewRun {
        idempotency_key: key.clone(),
        schedule_id: schedule_id.into(),
        run_at: ts(at),
        fire_at: ts(at),
        status: RunStatus::Pending,
        source: RunSource::Schedule,
        overlap: None,
        workflow_id: "wa".into(),
        version: 1,
        user_id: "u1".into(),
    };
    runs::insert(pool, &new, ts(at)).await.expect("insert run");
    sqlx::query(
        "update schedule_runs set deadline_at = run_at + make_interval(secs => $2), \
           deadline_open = $2 is not null where idempotency_key = $1",
    )
    .bind(&key)
    .bind(deadline_s)
    .execute(pool)
    .await
    .expect("deadline");
    key
}

/// The sweep's statement at `at`.
async fn sweep(pool: &PgPool, at: &str) -> usize {
    let mut conn = pool.acquire().await.expect("connection");
    deadlines::judge(&mut conn, ts(at), 100)
        .await
        .expect("judge")
        .late
        .len()
}

#[tokio::test]
async fn deadline_s_is_checked_stored_and_previewed() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    common::deploy_workflow(&api, "wa", 1).await;
    for bad in [json!(0), json!(-5), json!(31_536_001), json!("600")] {
        let (status, answer) = upsert(&api, schedule("s1", bad.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {answer}");
        assert_eq!(answer["errors"][0]["field"], "deadline_s", "{answer}");
    }
    let (status, _) = upsert(&api, schedule("s1", json!(0))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _, _) = call(&api, Method::GET, "/schedules/s1", Some(READER), None).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a refused write changes nothing"
    );

    let (status, answer) = upsert(&api, schedule("s1", json!(5400))).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    let uri = "/schedules/s1?explain=true";
    let (status, _, body) = call(&api, Method::GET, uri, Some(READER), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["deadline_s"], 5400);
    let ticks = body["explained_preview"].as_array().expect("explained");
    assert!(!ticks.is_empty());
    for tick in ticks {
        let at = ts(tick["at"].as_str().expect("at"));
        let deadline = (at + chrono::Duration::seconds(5400))
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        assert_eq!(tick["deadline_at"], deadline.as_str(), "{tick}");
    }
    // Without deadline_s the schedule has none, and neither have its ticks.
    let (status, _) = upsert(&api, schedule("s2", Value::Null)).await;
    assert_eq!(status, StatusCode::CREATED);
    let uri = "/schedules/s2?explain=true";
    let (_, _, body) = call(&api, Method::GET, uri, Some(READER), None).await;
    assert_eq!(body["deadline_s"], Value::Null);
    assert!(
        body["explained_preview"][0].get("deadline_at").is_none(),
        "{body}"
    );
}

#[tokio::test]
async fn late_runs_are_listed_newest_mark_first() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    common::deploy_workflow(&api, "wa", 1).await;
    for id in ["s1", "s2"] {
        let (status, answer) = upsert(&api, schedule(id, json!(600))).await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
    }
    let first = run(&pool, "s1", "2026-03-03T07:00:00Z", Some(600)).await;
    let second = run(&pool, "s1", "2026-03-04T07:00:00Z", Some(600)).await;
    let other = run(&pool, "s2", "2026-03-04T07:00:00Z", Some(600)).await;
    run(&pool, "s1", "2026-03-05T07:00:00Z", None).await;
    assert_eq!(sweep(&pool, "2026-03-03T08:00:00Z").await, 1);
    assert_eq!(sweep(&pool, "2026-03-04T08:00:00Z").await, 2);

    let list = |query: &str| {
        let api = api.clone();
        let uri = format!("/runs?{query}");
        async move { call(&api, Method::GET, &uri, Some(READER), None).await }
    };
    let (status, _, body) = list("late=true").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let keys: Vec<&str> = body["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|run| run["idempotency_key"].as_str().expect("key"))
        .collect();
    let mut newest = [second.as_str(), other.as_str()];
    newest.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(keys, [newest[0], newest[1], first.as_str()]);
    let oldest = &body["runs"][2];
    assert_eq!(oldest["late_at"], "2026-03-03T08:00:00Z");
    assert_eq!(oldest["deadline_at"], "2026-03-03T07:10:00Z");
    assert_eq!(oldest["status"], "PENDING", "late is a mark, not a status");
    assert_eq!(
        oldest["late_reason"],
        "PENDING and not final at its deadline 2026-03-03T07:10:00Z"
    );

    // Paged with the cursor, and filtered by schedule.
    let (_, _, page) = list("late=true&limit=2").await;
    assert_eq!(page["runs"].as_array().expect("runs").len(), 2);
    let cursor = page["next_cursor"].as_str().expect("a next page");
    let (_, _, rest) = list(&format!("late=true&limit=2&cursor={cursor}")).await;
    assert_eq!(rest["runs"][0]["idempotency_key"], first.as_str());
    assert_eq!(rest["next_cursor"], Value::Null);
    let (_, _, only) = list("late=true&schedule_id=s2").await;
    assert_eq!(only["runs"].as_array().expect("runs").len(), 1);
    assert_eq!(only["runs"][0]["idempotency_key"], other.as_str());

    // phase=late is late=true.
    let (_, _, phase) = list("phase=late").await;
    assert_eq!(phase["runs"], body["runs"]);

    // A bad filter is a 400 naming the parameter.
    for (query, field) in [
        ("phase=soon", "phase"),
        ("late=true&status=FAILED", "status"),
        ("late=false", "late"),
        ("late=yes", "late"),
        ("late=true&limit=0", "limit"),
        ("late=true&cursor=nope", "cursor"),
        ("late=true&zz=1", "zz"),
    ] {
        let (status, kind, body) = list(query).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(kind, "application/problem+json");
        assert_eq!(body["errors"][0]["field"], field, "{query}: {body}");
    }
    let (status, _, _) = call(&api, Method::GET, "/runs?late=true", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_preview_explains_each_fire_time_with_its_deadline() {
    let db = TestDb::new().await;
    let api = router(db.pool(), NOW);
    let body = json!({"cron_expr": "0 7 * * *", "timezone": "UTC", "count": 3,
                      "explain": true, "deadline_s": 900});
    let (status, _, answer) = call(
        &api,
        Method::POST,
        "/schedules/preview",
        Some(READER),
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let deadlines: Vec<&str> = answer["ticks"]
        .as_array()
        .expect("ticks")
        .iter()
        .map(|tick| tick["deadline_at"].as_str().expect("a deadline"))
        .collect();
    assert_eq!(
        deadlines,
        [
            "2026-03-06T07:15:00Z",
            "2026-03-07T07:15:00Z",
            "2026-03-08T07:15:00Z"
        ]
    );
    let body = json!({"cron_expr": "0 7 * * *", "timezone": "UTC", "deadline_s": 0});
    let (status, _, answer) = call(
        &api,
        Method::POST,
        "/schedules/preview",
        Some(READER),
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["errors"][0]["field"], "deadline_s", "{answer}");
}
