//! Regressions found by fuzzing the API against schemas/openapi.json (`scripts/api-fuzz`):
//! each request here once got an answer the contract does not allow.

use crate::common;

use axum::http::{Method, StatusCode};
use common::*;
use kairos_testkit::TestDb;

/// A query parameter with NUL or a character no id has reached SQL and failed (500).
#[tokio::test]
async fn dead_letter_filters_and_cursors_are_checked_like_ids() {
    let db = TestDb::new().await;
    let api = router(db.pool(), "2026-03-08T12:00:00Z");
    let cases = [
        ("schedule_id=%00", "schedule_id"),
        ("workflow_id=a%00b", "workflow_id"),
        ("workflow_id=%C3%A9", "workflow_id"),
        ("schedule_id=", "schedule_id"),
        ("cursor=1.%00", "cursor"),
        ("cursor=1.", "cursor"),
        ("cursor=", "cursor"),
    ];
    for (query, field) in cases {
        let uri = format!("/dead-letters?{query}");
        let (status, kind, body) = call(&api, Method::GET, &uri, Some(READER), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}: {body}");
        assert_eq!(kind, "application/problem+json", "{uri}");
        assert_eq!(body["errors"][0]["field"], field, "{uri}: {body}");
    }
    let (status, _, body) = call(
        &api,
        Method::GET,
        "/dead-letters?schedule_id=s1&workflow_id=wf&cursor=1774000000000000.k-1",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// JSON Schema's `integer` includes `160.0`; the server refused it as "not an integer".
#[tokio::test]
async fn integers_written_with_a_zero_fraction_are_integers() {
    let db = TestDb::new().await;
    let api = router(db.pool(), "2026-03-08T12:00:00Z");
    deploy_workflow(&api, "report", 1).await;
    let start = serde_json::json!({
        "workflow_id": "wf", "version": 160.0, "user_id": "u1",
        "scheduled_for": "2026-03-08T12:00:00Z", "idempotency_key": "k-1",
    });
    let (status, _, body) = call(
        &api,
        Method::POST,
        "/run-launcher/start",
        Some(EXECUTOR),
        Some(start),
    )
    .await;
    // Read as version 160: the workflow is unknown, so 404 (not 400 naming `version`).
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");

    let mut upsert = seed_body();
    upsert["version"] = serde_json::json!(1.0);
    upsert["retry_intervals_s"] = serde_json::json!([60.0, 300]);
    upsert["max_attempts"] = serde_json::json!(3.0);
    let (status, _, body) = call(
        &api,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        Some(upsert.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    upsert["version"] = serde_json::json!(1.5);
    let (status, _, body) = call(
        &api,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        Some(upsert),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["errors"][0]["field"], "version", "{body}");
}
