//! A schedule's next fire, one rule in `GET /schedules/{id}` and `GET /schedules`: none
//! while paused without an end; the first tick after the pause ends, skips applied; and a
//! trigger that overlap `skip` would only skip is refused, naming the run in flight.
//! Through the router on a real database, with "now" pinned.

use crate::common;

use axum::http::{Method, StatusCode};
use axum::Router;
use common::*;
use kairos_core::{RunKey, RunSource, RunStatus};
use kairos_store::runs::{self, NewRun};
use kairos_testkit::TestDb;
use serde_json::{json, Value};

const NOW: &str = "2026-03-08T12:00:00Z";

async fn post(api: &Router, uri: &str, body: Value) -> (StatusCode, Value) {
    let (status, _, answer) = call(api, Method::POST, uri, Some(DEPLOYER), Some(body)).await;
    (status, answer)
}

/// `next_run_at` of `s1` in its own view and in the list.
async fn next_run_at(api: &Router) -> (Value, Value) {
    let (status, _, one) = call(api, Method::GET, "/schedules/s1", Some(READER), None).await;
    assert_eq!(status, StatusCode::OK, "{one}");
    let (status, _, list) = call(api, Method::GET, "/schedules", Some(READER), None).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let listed = list["schedules"]
        .as_array()
        .expect("schedules")
        .iter()
        .find(|s| s["schedule_id"] == "s1")
        .expect("s1 listed")["next_run_at"]
        .clone();
    (one["next_run_at"].clone(), listed)
}

async fn with_schedule(overlap_policy: &str) -> (TestDb, Router) {
    let db = TestDb::new().await;
    let api = router(db.pool(), NOW);
    deploy_workflow(&api, "wf", 1).await;
    let body = json!({
        "schedule_id": "s1", "workflow_id": "wf", "version": 1, "user_id": "u",
        "cron_expr": "30 * * * *", "timezone": "UTC", "overlap_policy": overlap_policy,
    });
    upsert_new(&api, body).await;
    (db, api)
}

#[tokio::test]
async fn a_paused_schedule_fires_next_after_its_pause_ends_with_skips_applied() {
    let (_db, api) = with_schedule("skip").await;
    let at = |t: &str| (json!(t), json!(t));
    assert_eq!(next_run_at(&api).await, at("2026-03-08T12:30:00Z"));

    let pause = json!({"schedule_id": "s1", "paused": true});
    let (status, answer) = post(&api, "/schedules/pause", pause).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{answer}");
    assert_eq!(
        next_run_at(&api).await,
        (Value::Null, Value::Null),
        "paused without an end: no next fire"
    );

    let until = json!({"schedule_id": "s1", "paused": true, "until": "2026-03-10T06:00:00Z"});
    let (status, answer) = post(&api, "/schedules/pause", until).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{answer}");
    assert_eq!(next_run_at(&api).await, at("2026-03-10T06:30:00Z"));

    let skip = json!({"run_at": "2026-03-10T06:30:00Z"});
    let (status, answer) = post(&api, "/schedules/s1/skips", skip).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(
        next_run_at(&api).await,
        at("2026-03-10T07:30:00Z"),
        "the skipped tick is not the next fire"
    );

    let resume = json!({"schedule_id": "s1", "paused": false});
    let (status, answer) = post(&api, "/schedules/pause", resume).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{answer}");
    assert_eq!(next_run_at(&api).await, at("2026-03-08T12:30:00Z"));
}

#[tokio::test]
async fn a_trigger_that_overlap_skip_would_skip_is_refused_and_names_the_run_in_flight() {
    let (db, api) = with_schedule("skip").await;
    let pool = db.pool();
    let in_flight = RunKey::manual("s1", "first");
    let now = NOW.parse().expect("now");
    let run = NewRun {
        idempotency_key: in_flight.as_str().to_string(),
        schedule_id: "s1".into(),
        run_at: now,
        fire_at: now,
        status: RunStatus::Enqueued,
        source: RunSource::Manual,
        overlap: None,
        workflow_id: "wf".into(),
        version: 1,
        user_id: "u".into(),
    };
    assert!(runs::insert(&pool, &run, now).await.expect("insert"));
    let count = || async {
        kairos_testkit::sqlx::query_scalar::<_, i64>("select count(*) from schedule_runs")
            .fetch_one(&pool)
            .await
            .expect("count")
    };
    let before = count().await;

    let uri = "/schedules/s1/trigger";
    let (status, problem) = post(&api, uri, json!({"request_id": "second"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    let detail = problem["detail"].as_str().expect("detail");
    for words in [in_flight.as_str(), "skip", "\"allow\"", "\"queue\""] {
        assert!(detail.contains(words), "{words:?} in {detail}");
    }
    assert_eq!(count().await, before, "nothing written");

    // Under `allow` it runs beside the one in flight.
    let allow = json!({"request_id": "second", "overlap_policy": "allow"});
    let (status, answer) = post(&api, uri, allow).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(answer["status"], "PENDING");
    assert_eq!(count().await, before + 1);
}
