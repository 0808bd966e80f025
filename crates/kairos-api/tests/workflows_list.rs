//! `GET /workflows` (paged by cursor, `?q=` ignoring case) and `GET /workflows/{id}/versions`
//! (newest first, with the schedules of each), through the router on a real database; each
//! answer matches the OpenAPI document's schema for it.

use crate::common;

use axum::http::{Method, StatusCode};
use axum::Router;
use common::*;
use kairos_testkit::TestDb;
use serde_json::{json, Value};

const NOW: &str = "2026-03-09T12:00:00Z";

async fn read(api: &Router, uri: &str) -> (StatusCode, Value) {
    let (status, _, answer) = call(api, Method::GET, uri, Some(READER), None).await;
    (status, answer)
}

/// `answer` is valid under the 200 schema of `GET path` in the OpenAPI document.
fn matches_the_document(path: &str, answer: &Value) {
    let doc: Value = serde_json::from_str(kairos_api::openapi::OPENAPI_JSON).expect("document");
    let schema =
        &doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"];
    let root = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "components": doc["components"],
        "allOf": [schema],
    });
    let validator = jsonschema::options().build(&root).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(answer)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "GET {path}: {errors:?}\n{answer}");
}

async fn deployed() -> (TestDb, Router) {
    let db = TestDb::new().await;
    let api = router(db.pool(), NOW);
    deploy_workflow(&api, "billing-Nightly", 1).await;
    deploy_workflow(&api, "billing-Nightly", 2).await;
    deploy_workflow(&api, "reports", 1).await;
    let schedule = json!({
        "schedule_id": "s1", "workflow_id": "billing-Nightly", "version": 2, "user_id": "u",
        "cron_expr": "0 * * * *", "timezone": "UTC",
    });
    upsert_new(&api, schedule).await;
    (db, api)
}

#[tokio::test]
async fn workflows_are_listed_in_id_order_filtered_and_paged() {
    let (_db, api) = deployed().await;
    let (status, all) = read(&api, "/workflows").await;
    assert_eq!(status, StatusCode::OK, "{all}");
    matches_the_document("/workflows", &all);
    let rows: Vec<(Value, Value, Value, Value)> = all["workflows"]
        .as_array()
        .expect("workflows")
        .iter()
        .map(|w| {
            (
                w["workflow_id"].clone(),
                w["versions"].clone(),
                w["latest_version"].clone(),
                w["schedules"].clone(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (json!("billing-Nightly"), json!(2), json!(2), json!(1)),
            (json!("reports"), json!(1), json!(1), json!(0)),
        ]
    );
    assert_eq!(all["next_cursor"], Value::Null);

    let (_, found) = read(&api, "/workflows?q=NIGHT").await;
    assert_eq!(found["workflows"].as_array().map(Vec::len), Some(1));
    assert_eq!(found["workflows"][0]["workflow_id"], "billing-Nightly");
    let (_, none) = read(&api, "/workflows?q=%25").await;
    assert_eq!(none["workflows"], json!([]), "% matches itself");

    let (_, first) = read(&api, "/workflows?limit=1").await;
    assert_eq!(first["workflows"][0]["workflow_id"], "billing-Nightly");
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let (_, second) = read(&api, &format!("/workflows?limit=1&cursor={cursor}")).await;
    assert_eq!(second["workflows"][0]["workflow_id"], "reports");

    let (status, problem) = read(&api, "/workflows?limit=0").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "limit");
}

#[tokio::test]
async fn a_workflows_versions_are_listed_newest_first_with_their_schedules() {
    let (_db, api) = deployed().await;
    let (status, answer) = read(&api, "/workflows/billing-Nightly/versions").await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    matches_the_document("/workflows/{id}/versions", &answer);
    assert_eq!(answer["workflow_id"], "billing-Nightly");
    let versions: Vec<(Value, Value)> = answer["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|v| (v["version"].clone(), v["schedules"].clone()))
        .collect();
    assert_eq!(versions, [(json!(2), json!(1)), (json!(1), json!(0))]);

    let (status, problem) = read(&api, "/workflows/nope/versions").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("nope"),
        "{problem}"
    );
}
