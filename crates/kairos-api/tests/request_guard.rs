//! What a web page the operator opens cannot do (even with
//! `auth.mode = none`): write with a `text/plain` or form body (415), reach the API under a
//! rebound host name (403 on `Host`, reads included), or write from another origin (403 on
//! `Origin`). Each refusal is problem+json naming the header and stores nothing; a same-origin
//! write (the later `/ui`) still works.

use crate::common;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use common::*;
use http_body_util::BodyExt;
use kairos_api::{app, AppState};
use kairos_auth::{AuthConfig, Authenticator};
use kairos_registrar::{Registrar, Settings};
use kairos_store::PgPool;
use kairos_testkit::TestDb;
use kairos_worker::intake::Intake;
use serde_json::Value;
use tower::ServiceExt;

/// The router as `kairos serve` builds it with the default `auth.mode = none` on
/// 127.0.0.1:8080.
fn open_router(pool: PgPool) -> Router {
    let auth = Authenticator::from_config(&AuthConfig::default()).expect("auth none");
    app(AppState {
        intake: Intake::new(pool.clone()),
        nats: None,
        registrar: Registrar::new(
            pool,
            Settings {
                pinned_now: Some(ts("2026-03-08T12:00:00Z")),
                ..Settings::default()
            },
        ),
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

/// One request with the given headers; answers status and the JSON body (`Null` if none).
async fn send(
    router: &Router,
    method: Method,
    uri: &str,
    headers: &[(header::HeaderName, &str)],
    body: &str,
) -> (StatusCode, Value) {
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(name, *value);
    }
    let request = request.body(Body::from(body.to_string())).expect("request");
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|kind| kind == "application/problem+json");
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if status.is_client_error() {
        assert!(problem, "{status} is not problem+json: {json}");
    }
    (status, json)
}

fn seed() -> String {
    seed_body().to_string()
}

/// The first offending field a problem names.
fn field(answer: &Value) -> &str {
    answer["errors"][0]["field"].as_str().unwrap_or("")
}

#[tokio::test]
async fn a_body_that_is_not_json_is_refused_415_and_stores_nothing() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = open_router(pool.clone());
    db.store_workflow("report", 3).await;
    for kind in [
        Some("text/plain"),
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        let headers: Vec<_> = kind
            .map(|k| (header::CONTENT_TYPE, k))
            .into_iter()
            .collect();
        let (status, answer) =
            send(&api, Method::POST, "/schedules/upsert", &headers, &seed()).await;
        assert_eq!(
            status,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{kind:?}: {answer}"
        );
        assert_eq!(field(&answer), "Content-Type", "{answer}");
        assert!(answer["detail"]
            .as_str()
            .expect("detail")
            .contains("application/json"));
    }
    assert_eq!(table_counts(&pool).await, (0, 0, 1));
    let json = [(header::CONTENT_TYPE, "application/json; charset=utf-8")];
    let (status, answer) = send(&api, Method::POST, "/schedules/upsert", &json, &seed()).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
}

#[tokio::test]
async fn a_host_this_instance_does_not_answer_to_is_refused_reads_included() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = open_router(pool.clone());
    let json = (header::CONTENT_TYPE, "application/json");
    for host in [
        "attacker.example:8080",
        "attacker.example",
        "127.0.0.1:9999",
        "a b",
    ] {
        for (method, uri) in [
            (Method::GET, "/healthz"),
            (Method::GET, "/schedules"),
            (Method::POST, "/schedules/upsert"),
        ] {
            let headers = [(header::HOST, host), json.clone()];
            let (status, answer) = send(&api, method.clone(), uri, &headers, &seed()).await;
            assert_eq!(
                status,
                StatusCode::FORBIDDEN,
                "{host} {method} {uri}: {answer}"
            );
            assert_eq!(field(&answer), "Host", "{answer}");
        }
    }
    assert_eq!(table_counts(&pool).await, (0, 0, 0));
    let headers = [(header::HOST, "attacker.example"), json.clone()];
    let (_, answer) = send(&api, Method::GET, "/healthz", &headers, &seed()).await;
    let detail = answer["detail"].as_str().expect("detail");
    let listed = detail
        .rsplit_once('(')
        .map(|(_, hosts)| hosts.trim_end_matches(')'))
        .expect("the allowed hosts");
    let hosts: Vec<String> = listed.split(", ").map(str::to_ascii_lowercase).collect();
    let unique: std::collections::HashSet<&String> = hosts.iter().collect();
    assert_eq!(
        unique.len(),
        hosts.len(),
        "each allowed host once: {detail}"
    );
    assert!(hosts.contains(&"localhost:8080".to_string()), "{detail}");
    for host in [
        "localhost:8080",
        "127.0.0.1:8080",
        "LOCALHOST:8080",
        "localhost",
    ] {
        let headers = [(header::HOST, host)];
        let (status, _) = send(&api, Method::GET, "/healthz", &headers, "").await;
        assert_eq!(status, StatusCode::OK, "{host}");
    }
}

#[tokio::test]
async fn a_write_from_another_origin_is_refused_and_the_same_origin_may_write() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = open_router(pool.clone());
    db.store_workflow("report", 3).await;
    let json = (header::CONTENT_TYPE, "application/json");
    let host = (header::HOST, "localhost:8080");
    for origin in [
        "http://attacker.example",
        "http://attacker.example:8080",
        "http://localhost:9999",
        "null",
        "file://",
    ] {
        let headers = [host.clone(), json.clone(), (header::ORIGIN, origin)];
        let (status, answer) =
            send(&api, Method::POST, "/schedules/upsert", &headers, &seed()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{origin}: {answer}");
        assert_eq!(field(&answer), "Origin", "{answer}");
        let (status, _) = send(&api, Method::DELETE, "/schedules/x", &headers, "").await;
        assert_eq!(status, StatusCode::FORBIDDEN, "DELETE from {origin}");
    }
    assert_eq!(table_counts(&pool).await, (0, 0, 1));
    let same = [
        host.clone(),
        json.clone(),
        (header::ORIGIN, "http://localhost:8080"),
    ];
    let (status, answer) = send(&api, Method::POST, "/schedules/upsert", &same, &seed()).await;
    assert_eq!(status, StatusCode::CREATED, "same origin: {answer}");
    // Reads are not refused for their Origin (the Host check covers rebinding).
    let cross = [host, (header::ORIGIN, "http://attacker.example")];
    let (status, _) = send(&api, Method::GET, "/schedules/nightly-report", &cross, "").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_declared_length_over_the_limit_is_413_before_any_body() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = open_router(pool.clone());
    let headers = [
        (header::CONTENT_TYPE, "application/json"),
        (header::CONTENT_LENGTH, "100000000"),
    ];
    let (status, answer) = send(&api, Method::POST, "/schedules/upsert", &headers, "").await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{answer}");
    assert!(answer["detail"]
        .as_str()
        .expect("detail")
        .contains("max_body_bytes"));
}
