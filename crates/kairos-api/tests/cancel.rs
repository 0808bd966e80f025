//! `POST /runs/{key}/cancel` through the router on a real database (roles, 404, 400, the
//! answer for each status, 20 concurrent cancels answered 200 with one transition), and
//! the overlap fields of an upsert (`buffer_one`, `cancel_other`, `max_queued`): bad values
//! are refused naming the field and store nothing.

use crate::common;

use axum::http::{Method, StatusCode};
use common::*;
use kairos_store::PgPool;
use kairos_testkit::{sqlx, TestDb};
use serde_json::{json, Value};

const NOW: &str = "2026-03-09T12:00:00Z";

/// A router with schedule `nightly-report` and one PENDING run of it (trigger-now); the
/// run's key.
async fn with_run(pool: &PgPool) -> (axum::Router, String) {
    let router = router(pool.clone(), NOW);
    deploy_workflow(&router, "report", 3).await;
    let (status, _, answer) = call(
        &router,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        Some(seed_body()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    let (status, _, run) = call(
        &router,
        Method::POST,
        "/schedules/nightly-report/trigger",
        Some(DEPLOYER),
        Some(json!({"request_id": "r1"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{run}");
    let key = run["idempotency_key"].as_str().expect("key").to_string();
    (router, key)
}

async fn cancel(router: &axum::Router, key: &str, body: Option<Value>) -> (StatusCode, Value) {
    let uri = format!("/runs/{key}/cancel");
    let (status, _, answer) = call(router, Method::POST, &uri, Some(DEPLOYER), body).await;
    (status, answer)
}

/// Marks the run published and STARTED by executor `e1`, as a dispatcher and executor would.
async fn started(pool: &PgPool, key: &str) {
    sqlx::query(
        "update schedule_runs set status = 'STARTED', published_at = now(), \
         started_at = now(), executor_id = 'e1', exclusive = true where idempotency_key = $1",
    )
    .bind(key)
    .execute(pool)
    .await
    .expect("start run");
}

#[tokio::test]
async fn a_pending_run_is_cancelled_and_a_second_cancel_says_it_had_finished() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (router, key) = with_run(&pool).await;
    let (status, answer) = cancel(&router, &key, Some(json!({"reason": "not today"}))).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["status"], "CANCELLED");
    assert_eq!(answer["cancel"], "cancelled");
    assert_eq!(answer["reason"], "cancelled by an operator: not today");

    let (status, again) = cancel(&router, &key, None).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["cancel"], "already_finished");
    assert_eq!(again["status"], "CANCELLED");
    assert!(again["message"]
        .as_str()
        .expect("message")
        .contains("already finished"));
}

#[tokio::test]
async fn a_started_run_becomes_cancelling_and_a_finished_one_is_left_alone() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (router, key) = with_run(&pool).await;
    started(&pool, &key).await;
    let (status, answer) = cancel(&router, &key, Some(json!({}))).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(
        (answer["status"].clone(), answer["cancel"].clone()),
        (json!("CANCELLING"), json!("cancelling"))
    );
    // The executor confirms through the status route.
    let (status, _, run) = call(
        &router,
        Method::POST,
        &format!("/runs/{key}/status"),
        Some(EXECUTOR),
        Some(json!({"status": "CANCELLED", "executor_id": "e1"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["status"], "CANCELLED");

    // A run that succeeded before the cancel stays SUCCESS; the answer says so (200).
    let (router2, key2) = {
        let (status, _, run) = call(
            &router,
            Method::POST,
            "/schedules/nightly-report/trigger",
            Some(DEPLOYER),
            Some(json!({"request_id": "r2"})),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
        (
            router.clone(),
            run["idempotency_key"].as_str().expect("key").to_string(),
        )
    };
    started(&pool, &key2).await;
    let (status, _, _) = call(
        &router2,
        Method::POST,
        &format!("/runs/{key2}/status"),
        Some(EXECUTOR),
        Some(json!({"status": "SUCCESS", "executor_id": "e1"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, answer) = cancel(&router2, &key2, None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(
        (answer["status"].clone(), answer["cancel"].clone()),
        (json!("SUCCESS"), json!("already_finished"))
    );
}

#[tokio::test]
async fn twenty_concurrent_cancels_are_all_answered_200_with_one_transition() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (router, key) = with_run(&pool).await;
    started(&pool, &key).await;
    let calls = (0..20).map(|n| {
        let router = router.clone();
        let key = key.clone();
        tokio::spawn(async move {
            cancel(
                &router,
                &key,
                Some(json!({"reason": format!("caller {n}")})),
            )
            .await
        })
    });
    let calls: Vec<_> = calls.collect();
    let mut kinds = Vec::new();
    for call in calls {
        let (status, answer) = call.await.expect("join");
        assert_eq!(status, StatusCode::OK, "{answer}");
        assert_eq!(answer["status"], "CANCELLING");
        kinds.push(answer["cancel"].as_str().expect("cancel").to_string());
    }
    kinds.sort();
    assert_eq!(
        kinds.iter().filter(|k| *k == "cancelling").count(),
        1,
        "{kinds:?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| *k == "already_cancelling").count(),
        19
    );
}

#[tokio::test]
async fn cancel_needs_the_deployer_role_a_known_key_and_a_good_body() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (router, key) = with_run(&pool).await;
    let uri = format!("/runs/{key}/cancel");
    for token in [READER, EXECUTOR] {
        let (status, _, _) = call(&router, Method::POST, &uri, Some(token), None).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
    }
    let (status, answer) = cancel(&router, &"f".repeat(64), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    for (body, field) in [
        (json!({"reason": "x".repeat(1001)}), "reason"),
        (json!({"reason": 7}), "reason"),
        (json!({"why": "x"}), "why"),
    ] {
        let (status, answer) = cancel(&router, &key, Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        assert_eq!(answer["errors"][0]["field"], json!(field), "{answer}");
    }
    // Nothing was cancelled by the refused requests.
    let (status, _, run) = call(
        &router,
        Method::GET,
        &format!("/runs/{key}"),
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(run["status"], "PENDING");
}

#[tokio::test]
async fn overlap_policies_and_max_queued_are_checked_and_stored() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let router = router(pool.clone(), NOW);
    deploy_workflow(&router, "report", 3).await;
    let upsert = |changes: Value| upsert_changed(router.clone(), changes);
    for (changes, field) in [
        (
            json!({"overlap_policy": "queue", "max_queued": 0}),
            "max_queued",
        ),
        (
            json!({"overlap_policy": "queue", "max_queued": -3}),
            "max_queued",
        ),
        (
            json!({"overlap_policy": "queue", "max_queued": "2"}),
            "max_queued",
        ),
        (
            json!({"overlap_policy": "skip", "max_queued": 2}),
            "max_queued",
        ),
        (json!({"overlap_policy": "buffer_all"}), "overlap_policy"),
        (json!({"overlap_policy": "Cancel_Other"}), "overlap_policy"),
    ] {
        let (status, answer) = upsert(changes.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{changes}: {answer}");
        let fields: Vec<&str> = answer["errors"]
            .as_array()
            .expect("errors")
            .iter()
            .map(|e| e["field"].as_str().expect("field"))
            .collect();
        assert_eq!(fields, [field], "{changes}: {answer}");
        assert_eq!(table_counts(&pool).await, (0, 0, 1), "nothing stored");
    }
    for (changes, max_queued) in [
        (json!({"overlap_policy": "buffer_one"}), Value::Null),
        (json!({"overlap_policy": "cancel_other"}), Value::Null),
        (
            json!({"overlap_policy": "queue", "max_queued": 2}),
            json!(2),
        ),
    ] {
        let (status, answer) = upsert(changes.clone()).await;
        assert!(status.is_success(), "{changes}: {answer}");
        let (_, _, got) = call(
            &router,
            Method::GET,
            "/schedules/nightly-report",
            Some(READER),
            None,
        )
        .await;
        assert_eq!(got["overlap_policy"], changes["overlap_policy"]);
        assert_eq!(got["max_queued"], max_queued);
    }
}

#[tokio::test]
async fn max_in_flight_is_checked_by_its_rule_and_stored() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let router = router(pool.clone(), NOW);
    deploy_workflow(&router, "report", 3).await;
    let upsert = |changes: Value| upsert_changed(router.clone(), changes);
    for (changes, rule) in [
        (
            json!({"overlap_policy": "skip", "max_in_flight": 0}),
            "between 1 and 1000",
        ),
        (
            json!({"overlap_policy": "queue", "max_in_flight": 1001}),
            "between 1 and 1000",
        ),
        (
            json!({"overlap_policy": "allow", "max_in_flight": 3}),
            "allow has no limit",
        ),
    ] {
        let (status, answer) = upsert(changes.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{changes}: {answer}");
        let errors = answer["errors"].as_array().expect("errors");
        assert_eq!(errors.len(), 1, "{changes}: {answer}");
        assert_eq!(errors[0]["field"], "max_in_flight", "{answer}");
        let message = errors[0]["rule"].as_str().expect("rule");
        assert!(message.contains(rule), "{changes}: {message}");
        assert_eq!(table_counts(&pool).await, (0, 0, 1), "nothing stored");
    }
    for (changes, max_in_flight) in [
        (
            json!({"overlap_policy": "skip", "max_in_flight": 4}),
            json!(4),
        ),
        (
            json!({"overlap_policy": "cancel_other", "max_in_flight": 1000}),
            json!(1000),
        ),
        (json!({"overlap_policy": "queue"}), Value::Null),
    ] {
        let (status, answer) = upsert(changes.clone()).await;
        assert!(status.is_success(), "{changes}: {answer}");
        let (_, _, got) = call(
            &router,
            Method::GET,
            "/schedules/nightly-report",
            Some(READER),
            None,
        )
        .await;
        assert_eq!(got["max_in_flight"], max_in_flight, "{got}");
    }
}

/// `POST /schedules/upsert` of the seed body with `changes` over it: the status and answer.
async fn upsert_changed(router: axum::Router, changes: Value) -> (StatusCode, Value) {
    let mut body = seed_body();
    for (field, value) in changes.as_object().expect("object") {
        body[field] = value.clone();
    }
    let (status, _, answer) = call(
        &router,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        Some(body),
    )
    .await;
    (status, answer)
}
