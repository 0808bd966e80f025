//! Regression tests named after bugs other schedulers shipped (`conformance/matrix.toml`
//! lists them): manual triggers through the router on a real database, "now" pinned so that
//! every request falls in the same second.

use crate::common;

use axum::http::{Method, StatusCode};
use common::*;
use kairos_core::RunKey;
use kairos_store::PgPool;
use kairos_testkit::sqlx;
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

/// Sends one trigger per request id, all at once; answers (status, key) in request order.
async fn triggers_at_once(
    router: &axum::Router,
    request_ids: &[&str],
) -> Vec<(StatusCode, String)> {
    let calls: Vec<_> = request_ids
        .iter()
        .map(|request_id| {
            let router = router.clone();
            let body = json!({ "request_id": request_id });
            tokio::spawn(async move {
                let uri = "/schedules/nightly-report/trigger";
                let (status, _, answer) =
                    call(&router, Method::POST, uri, Some(DEPLOYER), Some(body)).await;
                let key = answer["idempotency_key"].as_str().unwrap_or("").to_string();
                (status, key)
            })
        })
        .collect();
    let mut answers = Vec::new();
    for call in calls {
        answers.push(call.await.expect("trigger task"));
    }
    answers
}

/// temporal#3614: three or more manual triggers of one schedule within one second were
/// mishandled. Five concurrent triggers with distinct request ids in the same second are
/// five runs with five keys; five with one request id are one run.
#[tokio::test]
async fn temporal_3614_manual_triggers_in_one_second_are_one_run_per_request_id() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let router = with_schedule(&pool).await;
    let ids = ["req-1", "req-2", "req-3", "req-4", "req-5"];
    let answers = triggers_at_once(&router, &ids).await;
    for ((status, key), request_id) in answers.iter().zip(ids) {
        assert_eq!(*status, StatusCode::CREATED, "{request_id}");
        assert_eq!(key, RunKey::manual("nightly-report", request_id).as_str());
    }
    assert_eq!(table_counts(&pool).await.1, 5, "one run per request id");
    let run_ats: Vec<String> =
        sqlx::query_scalar("select distinct run_at::text from schedule_runs")
            .fetch_all(&pool)
            .await
            .expect("run_at");
    assert_eq!(run_ats.len(), 1, "all five in the same second: {run_ats:?}");

    let same = ["req-9"; 5];
    let answers = triggers_at_once(&router, &same).await;
    let created = answers
        .iter()
        .filter(|(status, _)| *status == StatusCode::CREATED)
        .count();
    assert_eq!(created, 1, "{answers:?}");
    assert!(
        answers.iter().all(
            |(status, key)| matches!(*status, StatusCode::CREATED | StatusCode::OK)
                && key == RunKey::manual("nightly-report", "req-9").as_str()
        ),
        "every answer names the one run: {answers:?}"
    );
    assert_eq!(
        table_counts(&pool).await.1,
        6,
        "the same request id is one run"
    );
}
