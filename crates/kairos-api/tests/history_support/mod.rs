//! Helpers of the history tests: requests with a request id as the deployer, reads as the
//! reader, and the changes recorded, read straight from `change_history`.

#![allow(dead_code)] // Each test binary uses a part of this harness.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use kairos_store::PgPool;
use kairos_testkit::sqlx;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::common::{call, seed_body, DEPLOYER, READER};

/// One request with `X-Request-Id: request_id`; answers status and JSON body.
pub async fn send(
    router: &Router,
    method: Method,
    uri: &str,
    request_id: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let bytes = body.map_or_else(Vec::new, |b| serde_json::to_vec(&b).expect("json"));
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::AUTHORIZATION, format!("Bearer {DEPLOYER}"))
        .header("x-request-id", request_id)
        .body(Body::from(bytes))
        .expect("request");
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).expect("json answer")
    };
    (status, body)
}

/// `GET uri` as the reader; the answer must be 200.
pub async fn read(router: &Router, uri: &str) -> Value {
    let (status, _, body) = call(router, Method::GET, uri, Some(READER), None).await;
    assert_eq!(status, StatusCode::OK, "{uri}: {body}");
    body
}

/// Every change recorded in request `request_id` (read straight from the table).
pub async fn rows_of(
    pool: &PgPool,
    request_id: &str,
) -> Vec<(String, String, Option<String>, Value)> {
    sqlx::query_as(
        "select kind, actor, note, changes from change_history where request_id = $1 order by id",
    )
    .bind(request_id)
    .fetch_all(pool)
    .await
    .expect("history rows")
}

pub async fn history_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from change_history")
        .fetch_one(pool)
        .await
        .expect("count")
}

/// The one change of request `request_id`: its kind, actor and note, and its fields as
/// `field → [old, new]`.
pub async fn one_change(
    pool: &PgPool,
    request_id: &str,
) -> (
    String,
    String,
    Option<String>,
    serde_json::Map<String, Value>,
) {
    let mut rows = rows_of(pool, request_id).await;
    assert_eq!(rows.len(), 1, "request {request_id}: {rows:?}");
    let (kind, actor, note, changes) = rows.remove(0);
    let fields = changes
        .as_array()
        .expect("changes is an array")
        .iter()
        .map(|c| {
            let name = c["field"].as_str().expect("field").to_string();
            (name, json!([c["old"], c["new"]]))
        })
        .collect();
    (kind, actor, note, fields)
}

pub fn upsert_body(cron: &str) -> Value {
    let mut body = seed_body();
    body["cron_expr"] = json!(cron);
    body
}
