//! `POST /schedules/{id}/trigger` and `POST /schedules/{id}/backfill` through the router on
//! a real database, with "now" pinned.

use crate::common;

use axum::http::{Method, StatusCode};
use common::*;
use kairos_core::RunKey;
use kairos_store::PgPool;
use kairos_testkit::TestDb;
use serde_json::json;

const NOW: &str = "2026-03-09T12:00:00.250Z";

async fn with_schedule(pool: &PgPool) -> axum::Router {
    let router = router(pool.clone(), NOW);
    deploy_workflow(&router, "report", 3).await;
    let mut body = seed_body();
    body["cron_expr"] = json!("0 * * * *");
    body["timezone"] = json!("UTC");
    upsert_new(&router, body).await;
    router
}

async fn trigger(router: &axum::Router, request_id: &str) -> (StatusCode, serde_json::Value) {
    let body = json!({ "request_id": request_id });
    let (status, _, answer) = call(
        router,
        Method::POST,
        "/schedules/nightly-report/trigger",
        Some(DEPLOYER),
        Some(body),
    )
    .await;
    (status, answer)
}

#[tokio::test]
async fn trigger_twice_with_one_request_id_is_one_run() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let router = with_schedule(&pool).await;
    let (status, first) = trigger(&router, "req-1").await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(
        first["idempotency_key"],
        RunKey::manual("nightly-report", "req-1").as_str()
    );
    assert_eq!(first["source"], "manual");
    assert_eq!(first["status"], "PENDING");
    assert_eq!(first["run_at"], "2026-03-09T12:00:00Z", "whole seconds");
    assert_eq!(first["fire_at"], "2026-03-09T12:00:00.250Z", "fires now");
    assert_eq!(
        (first["workflow_id"].clone(), first["version"].clone()),
        (json!("report"), json!(3))
    );

    let (status, again) = trigger(&router, "req-1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again, first);
    assert_eq!(table_counts(&pool).await.1, 1);

    // The same request id with other parameters is another request: refused, not answered
    // with the first one's run.
    let other = json!({ "request_id": "req-1", "overlap_policy": "allow" });
    let uri = "/schedules/nightly-report/trigger";
    let (status, _, problem) = call(&router, Method::POST, uri, Some(DEPLOYER), Some(other)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    let detail = problem["detail"].as_str().expect("detail");
    assert!(
        detail.contains("req-1") && detail.contains("allow"),
        "{detail}"
    );
    assert_eq!(table_counts(&pool).await.1, 1);
}

#[tokio::test]
async fn two_request_ids_in_one_second_are_two_runs() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let router = with_schedule(&pool).await;
    let (a, first) = trigger(&router, "req-a").await;
    let (b, second) = trigger(&router, "req-b").await;
    assert_eq!((a, b), (StatusCode::CREATED, StatusCode::CREATED));
    assert_eq!(first["run_at"], second["run_at"]);
    assert_ne!(first["idempotency_key"], second["idempotency_key"]);
    assert_eq!(table_counts(&pool).await.1, 2);
}

#[tokio::test]
async fn trigger_refuses_a_bad_request_id_and_an_unknown_schedule() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let router = with_schedule(&pool).await;
    let (status, problem) = trigger(&router, "no spaces").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(problem["errors"][0]["field"], "request_id");
    let (status, _, problem) = call(
        &router,
        Method::POST,
        "/schedules/nightly-report/trigger",
        Some(DEPLOYER),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(problem["errors"][0]["field"], "request_id");
    let (status, _, _) = call(
        &router,
        Method::POST,
        "/schedules/nope/trigger",
        Some(DEPLOYER),
        Some(json!({"request_id": "r"})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = call(
        &router,
        Method::POST,
        "/schedules/nightly-report/trigger",
        Some(READER),
        Some(json!({"request_id": "r"})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(table_counts(&pool).await.1, 0);
}

async fn backfill(router: &axum::Router, from: &str, to: &str) -> (StatusCode, serde_json::Value) {
    let body = json!({ "from": from, "to": to });
    let (status, _, answer) = call(
        router,
        Method::POST,
        "/schedules/nightly-report/backfill",
        Some(DEPLOYER),
        Some(body),
    )
    .await;
    (status, answer)
}

#[tokio::test]
async fn backfill_twice_creates_once_and_counts_the_rest_present() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let router = with_schedule(&pool).await;
    let (status, first) = backfill(&router, "2026-03-09T08:00:00Z", "2026-03-09T10:00:00Z").await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(
        first,
        json!({"ticks": 3, "created": 3, "already_present": 0})
    );
    let (_, second) = backfill(&router, "2026-03-09T07:30:00Z", "2026-03-09T11:00:00Z").await;
    assert_eq!(
        second,
        json!({"ticks": 4, "created": 1, "already_present": 3})
    );

    let (_, _, runs) = call(
        &router,
        Method::GET,
        "/schedules/nightly-report/runs",
        Some(READER),
        None,
    )
    .await;
    let runs = runs["runs"].as_array().expect("runs").clone();
    assert_eq!(runs.len(), 4);
    for run in &runs {
        assert_eq!(run["source"], "backfill");
        let run_at = ts(run["run_at"].as_str().expect("run_at"));
        assert_eq!(
            run["idempotency_key"],
            RunKey::tick("nightly-report", run_at).as_str()
        );
    }
}

#[tokio::test]
async fn backfill_refuses_reversed_future_and_oversized_ranges() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let router = with_schedule(&pool).await;
    for (from, to) in [
        ("2026-03-09T10:00:00Z", "2026-03-09T08:00:00Z"),
        ("2026-03-09T10:00:00Z", "2026-03-09T13:00:00Z"),
        ("2025-01-01T00:00:00Z", "2026-03-09T10:00:00Z"),
    ] {
        let (status, problem) = backfill(&router, from, to).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{from}..{to}: {problem}");
        assert_eq!(problem["errors"][0]["field"], "to");
    }
    let (status, problem) = backfill(&router, "yesterday", "2026-03-09T10:00:00Z").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(problem["errors"][0]["field"], "from");
    assert_eq!(table_counts(&pool).await.1, 0);
}
