//! Test harness: the real router over a per-test database, called with `oneshot`, with
//! static tokens for each role.

#![allow(dead_code)]

use kairos_testkit::sqlx;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use chrono::{DateTime, Utc};
use http_body_util::BodyExt;
use kairos_api::{app, AppState};
use kairos_auth::{AuthConfig, AuthMode, Authenticator, Role, StaticToken};
use kairos_registrar::{Registrar, Settings};
use kairos_store::PgPool;
use kairos_worker::intake::Intake;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tower::ServiceExt;

/// Bearer tokens of the three roles.
pub const DEPLOYER: &str = "deployer-token";
pub const READER: &str = "reader-token";
pub const EXECUTOR: &str = "executor-token";
/// The test body limit.
pub const MAX_BODY: usize = 16 * 1024;

pub fn ts(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("test timestamp")
        .with_timezone(&Utc)
}

fn token(name: &str, role: Role, secret: &str) -> StaticToken {
    StaticToken {
        name: name.into(),
        role,
        sha256: hex::encode(Sha256::digest(secret)),
    }
}

/// The hosts the test routers answer to: those of a listener on 127.0.0.1:8080.
pub fn allowed_hosts() -> kairos_api::AllowedHosts {
    kairos_api::AllowedHosts::for_bind(([127, 0, 0, 1], 8080).into())
}

/// The router with static-token auth, "now" pinned to `now`, and `settings` adjustments.
pub fn router_with(pool: PgPool, settings: Settings) -> Router {
    let auth = AuthConfig {
        mode: AuthMode::Tokens,
        tokens: vec![
            token("compiler", Role::Deployer, DEPLOYER),
            token("dashboard", Role::Reader, READER),
            token("executor", Role::Executor, EXECUTOR),
        ],
        ..AuthConfig::default()
    };
    let auth = Authenticator::from_config(&auth).expect("auth config");
    app(AppState {
        intake: Intake::new(pool.clone()),
        nats: None,
        registrar: Registrar::new(pool, settings),
        auth: Arc::new(auth),
        max_body_bytes: MAX_BODY,
        allowed_hosts: allowed_hosts(),
        metrics: None,
        status_subjects: kairos_launcher::status::StatusSubjects {
            prefix: "kairos".into(),
            partitions: 16,
        },
    })
}

/// The router with "now" pinned.
pub fn router(pool: PgPool, now: &str) -> Router {
    router_with(
        pool,
        Settings {
            pinned_now: Some(ts(now)),
            ..Settings::default()
        },
    )
}

/// One request; answers status, content type and the JSON body (`Null` when empty, a
/// string for a `text/*` answer).
pub async fn call(
    router: &Router,
    method: Method,
    uri: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, String, Value) {
    let bytes = body
        .map(|b| serde_json::to_vec(&b).expect("json"))
        .unwrap_or_default();
    call_raw(router, method, uri, token, bytes).await
}

/// One request with a raw body.
pub async fn call_raw(
    router: &Router,
    method: Method,
    uri: &str,
    token: Option<&str>,
    body: Vec<u8>,
) -> (StatusCode, String, Value) {
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let request = request.body(Body::from(body)).expect("request");
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let kind = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().expect("ascii").to_string())
        .unwrap_or_default();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let json = if bytes.is_empty() {
        Value::Null
    } else if kind.starts_with("text/") {
        // The operator page's HTML fragments.
        Value::String(String::from_utf8_lossy(&bytes).into_owned())
    } else {
        serde_json::from_slice(&bytes).expect("json answer")
    };
    (status, kind, json)
}

/// The seed 001 upsert body.
pub fn seed_body() -> Value {
    serde_json::json!({
        "schedule_id": "nightly-report",
        "workflow_id": "report",
        "version": 3,
        "user_id": "alice",
        "cron_expr": "0 7 * * *",
        "timezone": "America/New_York",
        "jitter_ms": 0,
        "overlap_policy": "skip",
        "catchup_policy": "none"
    })
}

/// Upserts the schedule `body` through the API as the deployer; it must be new (201).
pub async fn upsert_new(router: &Router, body: Value) {
    let (status, _, answer) = call(
        router,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
}

/// Stores workflow `id` version `version` (a one-node DAG) through the API, as a compiler
/// deploys a version before it upserts schedules that name it.
pub async fn deploy_workflow(router: &Router, id: &str, version: i64) {
    let uri = format!("/workflows/{id}/versions/{version}");
    let dag = serde_json::json!({"dag": {"nodes": [{"id": "a"}]}});
    let (status, _, body) = call(router, Method::PUT, &uri, Some(DEPLOYER), Some(dag)).await;
    assert!(status.is_success(), "deploy {uri}: {status} {body}");
}

/// Rows in the three tables, to prove a refused request stored nothing.
pub async fn table_counts(pool: &PgPool) -> (i64, i64, i64) {
    let count = |table: &'static str| async move {
        sqlx::query_scalar::<_, i64>(&format!("select count(*) from {table}"))
            .fetch_one(pool)
            .await
            .expect("count")
    };
    (
        count("schedules").await,
        count("schedule_runs").await,
        count("workflows").await,
    )
}
