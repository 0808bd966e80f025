//! Failure handling through the HTTP API on a real database: a schedule's retry policy and
//! heartbeat timeout are stored and shown, bad policies are refused naming the field (and
//! store nothing), and a dead-lettered run is listed, shown with its attempts, and retried
//! on request (idempotent per request id).

use crate::common;

use axum::http::{Method, StatusCode};
use common::{call, deploy_workflow, router, DEPLOYER, EXECUTOR, READER};
use kairos_testkit::{sqlx, TestDb};
use serde_json::{json, Value};

const NOW: &str = "2026-03-08T12:00:00Z";

fn upsert(extra: Value) -> Value {
    let mut body = json!({"schedule_id": "s1", "workflow_id": "wf", "version": 1,
        "user_id": "u1", "cron_expr": "0 * * * *", "timezone": "UTC"});
    for (k, v) in extra.as_object().expect("object") {
        body[k] = v.clone();
    }
    body
}

#[tokio::test]
async fn retry_policies_are_stored_shown_and_bad_ones_refused_by_field() {
    let db = TestDb::new().await;
    let api = router(db.pool(), NOW);
    deploy_workflow(&api, "wf", 1).await;
    let policy = json!({"max_attempts": 3, "retry_intervals_s": [60, 300, 900],
        "heartbeat_timeout_s": 30});
    let (status, _, body) = call(
        &api,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        Some(upsert(policy)),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (_, _, shown) = call(&api, Method::GET, "/schedules/s1", Some(READER), None).await;
    assert_eq!(
        (
            shown["max_attempts"].clone(),
            shown["retry_intervals_s"].clone(),
            shown["retry_backoff"].clone(),
            shown["heartbeat_timeout_s"].clone()
        ),
        (json!(3), json!([60, 300, 900]), Value::Null, json!(30))
    );
    let backoff = json!({"max_attempts": 5,
        "retry_backoff": {"initial_s": 10, "multiplier": 2.5, "max_s": 600}});
    let (status, _, _) = call(
        &api,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        Some(upsert(backoff)),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, _, shown) = call(&api, Method::GET, "/schedules/s1", Some(READER), None).await;
    assert_eq!(
        (
            shown["retry_backoff"].clone(),
            shown["retry_intervals_s"].clone()
        ),
        (
            json!({"initial_s": 10, "multiplier": 2.5, "max_s": 600}),
            Value::Null
        )
    );

    let bad = [
        (json!({"max_attempts": 0}), "max_attempts"),
        (json!({"max_attempts": 101}), "max_attempts"),
        (
            json!({"max_attempts": 3, "retry_intervals_s": [10, 0]}),
            "retry_intervals_s",
        ),
        (
            json!({"max_attempts": 3, "retry_intervals_s": [-5]}),
            "retry_intervals_s",
        ),
        (
            json!({"max_attempts": 3, "retry_intervals_s": vec![1; 101]}),
            "retry_intervals_s",
        ),
        (
            json!({"max_attempts": 3, "retry_intervals_s": []}),
            "retry_intervals_s",
        ),
        (
            json!({"max_attempts": 3, "retry_intervals_s": [1],
            "retry_backoff": {"initial_s": 1, "multiplier": 2, "max_s": 5}}),
            "retry_intervals_s",
        ),
        (
            json!({"retry_backoff": {"initial_s": 10, "multiplier": 0.5, "max_s": 60}}),
            "retry_backoff.multiplier",
        ),
        (
            json!({"retry_backoff": {"initial_s": 10, "multiplier": 2, "max_s": 5}}),
            "retry_backoff.max_s",
        ),
        (
            json!({"retry_backoff": {"initial_s": 10, "max_s": 60}}),
            "retry_backoff.multiplier",
        ),
        (json!({"heartbeat_timeout_s": 0}), "heartbeat_timeout_s"),
    ];
    for (fields, field) in bad {
        let (status, kind, body) = call(
            &api,
            Method::POST,
            "/schedules/upsert",
            Some(DEPLOYER),
            Some(upsert(fields.clone())),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{fields}: {body}");
        assert_eq!(kind, "application/problem+json");
        let named: Vec<&str> = body["errors"]
            .as_array()
            .expect("errors")
            .iter()
            .filter_map(|e| e["field"].as_str())
            .collect();
        assert!(named.contains(&field), "{fields}: {body}");
    }
    let (_, _, shown) = call(&api, Method::GET, "/schedules/s1", Some(READER), None).await;
    assert_eq!(
        shown["max_attempts"],
        json!(5),
        "no refused upsert changed the schedule"
    );
}

#[tokio::test]
async fn dead_letters_are_listed_shown_with_attempts_and_retried_on_request() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    // A run whose one attempt was published, started and failed.
    let key = "d".repeat(64);
    sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
           workflow_id, version, user_id, published_at) \
         values ($1, 's1', '2026-03-08T11:00:00Z', '2026-03-08T11:00:00Z', 'ENQUEUED', 'wf', 1, \
           'u1', '2026-03-08T11:00:01Z')",
    )
    .bind(&key)
    .execute(&pool)
    .await
    .expect("run");
    let uri = format!("/runs/{key}/status");
    let failed = json!({"status": "FAILED", "executor_id": "e1", "error": "exit 3"});
    let (status, _, run) = call(&api, Method::POST, &uri, Some(EXECUTOR), Some(failed)).await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["status"], json!("FAILED"));
    assert!(
        run["dead_lettered_at"].is_string(),
        "no retry policy: one attempt, dead letter"
    );

    let (_, _, page) = call(
        &api,
        Method::GET,
        "/dead-letters?schedule_id=s1",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(page["runs"][0]["idempotency_key"], json!(key));
    assert_eq!(page["next_cursor"], Value::Null);
    let (_, _, shown) = call(
        &api,
        Method::GET,
        &format!("/runs/{key}"),
        Some(READER),
        None,
    )
    .await;
    assert_eq!(shown["history"][0]["error"], json!("exit 3"));
    assert_eq!(shown["max_attempts"], json!(1));

    let retry = format!("/runs/{key}/retry");
    let (status, _, _) = call(
        &api,
        Method::POST,
        &retry,
        Some(READER),
        Some(json!({"request_id": "r1"})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "retry is the deployer's");
    let (status, _, run) = call(
        &api,
        Method::POST,
        &retry,
        Some(DEPLOYER),
        Some(json!({"request_id": "r1"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{run}");
    assert_eq!(
        (run["status"].clone(), run["attempt"].clone()),
        (json!("RETRYING"), json!(2))
    );
    assert!(run["next_attempt_at"].is_string());
    let (status, _, again) = call(
        &api,
        Method::POST,
        &retry,
        Some(DEPLOYER),
        Some(json!({"request_id": "r1"})),
    )
    .await;
    assert_eq!(
        (status, again["attempt"].clone()),
        (StatusCode::OK, json!(2))
    );
    let (status, _, body) = call(
        &api,
        Method::POST,
        &retry,
        Some(DEPLOYER),
        Some(json!({"request_id": "r2"})),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "a RETRYING run has not finished: {body}"
    );
    let (_, _, page) = call(&api, Method::GET, "/dead-letters", Some(READER), None).await;
    assert_eq!(
        page["runs"],
        json!([]),
        "a retried run is no dead letter any more"
    );
    let (status, _, _) = call(&api, Method::GET, "/runs/nope", Some(READER), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
