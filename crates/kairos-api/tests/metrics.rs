//! `GET /metrics` after driving known work through the API on a real database and
//! nats-server: a run started through `POST /run-launcher/start` and executor reports
//! through `POST /runs/{key}/status` show up as counts in the scraped text. The test sets
//! its own recorder on its single-threaded runtime, so it sees only its own counts.

use crate::common;

use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use common::{call, EXECUTOR};
use http_body_util::BodyExt;
use kairos_api::{app, AppState};
use kairos_auth::{AuthConfig, AuthMode, Authenticator, Role, StaticToken};
use kairos_launcher::{NatsConfig, NatsLink};
use kairos_registrar::{Registrar, Settings};
use kairos_store::PgPool;
use kairos_testkit::prometheus::sample;
use kairos_testkit::NatsServer;
use kairos_worker::dispatcher::{Dispatcher, DispatcherConfig};
use kairos_worker::intake::Intake;
use kairos_worker::metrics as m;
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::json;
use sha2::{Digest, Sha256};
use tower::ServiceExt;

async fn api(pool: PgPool, nats: &NatsServer, metrics: PrometheusHandle) -> Router {
    let auth = AuthConfig {
        mode: AuthMode::Tokens,
        tokens: vec![StaticToken {
            name: "executor".into(),
            role: Role::Executor,
            sha256: hex::encode(Sha256::digest(EXECUTOR)),
        }],
        ..AuthConfig::default()
    };
    let link = NatsLink::new();
    link.connect(NatsConfig::new(nats.url()))
        .await
        .expect("nats connect");
    let launcher = link.get().expect("connected").clone();
    let config = DispatcherConfig::new(100, Duration::from_millis(50), Duration::from_secs(300));
    let intake = Intake::new(pool.clone());
    intake.attach(Arc::new(Dispatcher::new(pool.clone(), launcher, config)));
    app(AppState {
        intake,
        nats: Some(link),
        registrar: Registrar::new(pool.clone(), Settings::default()),
        auth: Arc::new(Authenticator::from_config(&auth).expect("auth")),
        max_body_bytes: common::MAX_BODY,
        allowed_hosts: common::allowed_hosts(),
        metrics: Some(metrics),
        status_subjects: kairos_launcher::status::StatusSubjects {
            prefix: "kairos".into(),
            partitions: 16,
        },
    })
}

/// `GET /metrics` without a token: status, content type, body.
async fn scrape(router: &Router) -> (StatusCode, String, String) {
    let request = Request::builder()
        .uri("/metrics")
        .body(Body::empty())
        .expect("request");
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let kind = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().expect("ascii").to_string())
        .unwrap_or_default();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        kind,
        String::from_utf8(body.to_vec()).expect("utf-8"),
    )
}

#[tokio::test]
async fn scrape_counts_what_the_api_did() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let recorder = m::recorder();
    let _local = metrics::set_default_local_recorder(&recorder);
    let nats = NatsServer::start();
    let router = api(pool.clone(), &nats, recorder.handle()).await;
    sqlx::query("insert into workflows (workflow_id, version, dag) values ('wf', 1, $1)")
        .bind(json!({"nodes": [{"id": "a"}]}))
        .execute(&pool)
        .await
        .expect("workflow");
    let start = json!({"workflow_id": "wf", "version": 1, "user_id": "u",
        "scheduled_for": "2026-03-01T10:00:00Z", "idempotency_key": "order-1"});
    let (status, _, body) = call(
        &router,
        Method::POST,
        "/run-launcher/start",
        Some(EXECUTOR),
        Some(start),
    )
    .await;
    assert_eq!(
        body,
        json!({"started": true, "status": "ENQUEUED"}),
        "{status}"
    );
    for (key, report, expected) in [
        ("order-1", "STARTED", StatusCode::OK),
        ("order-1", "STARTED", StatusCode::OK),
        ("order-1", "SUCCESS", StatusCode::OK),
        ("order-2", "FAILED", StatusCode::NOT_FOUND),
    ] {
        let body = json!({"status": report, "executor_id": "exec-1"});
        let uri = format!("/runs/{key}/status");
        let (status, _, _) = call(&router, Method::POST, &uri, Some(EXECUTOR), Some(body)).await;
        assert_eq!(status, expected, "{key} {report}");
    }

    let (status, kind, text) = scrape(&router).await;
    assert_eq!(status, StatusCode::OK);
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    let value = |name: &str, labels: &[(&str, &str)]| {
        sample(&text, name, labels).unwrap_or_else(|| panic!("{name} missing in:\n{text}"))
    };
    assert_eq!(value(m::RUNS_EMITTED, &[]), 1.0);
    let events = |status, outcome| {
        value(
            m::STATUS_EVENTS,
            &[("status", status), ("outcome", outcome)],
        )
    };
    assert_eq!(events("STARTED", "applied"), 1.0);
    assert_eq!(events("STARTED", "unchanged"), 1.0);
    assert_eq!(events("SUCCESS", "applied"), 1.0);
    assert_eq!(events("FAILED", "unknown_run"), 1.0);
    // An api run has no planned tick: no drift sample.
    let drift = sample(&text, "kairos_fire_drift_seconds_count", &[]);
    assert_eq!(drift.unwrap_or(0.0), 0.0);
    every_metric_is_documented(&text);
}

/// Every metric the scrape exports, and every name of the worker's catalog, has its row in
/// docs/operations.md's table.
fn every_metric_is_documented(scrape: &str) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/operations.md")).expect("operations.md");
    let catalog = std::fs::read_to_string(root.join("crates/kairos-worker/src/metrics.rs"))
        .expect("the worker's metrics");
    let exported = scrape
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_whitespace().next());
    let named = catalog
        .lines()
        .filter(|line| line.starts_with("pub const ") && line.contains("&str = \"kairos_"))
        .filter_map(|line| line.split('"').nth(1));
    let mut missing: Vec<&str> = exported
        .chain(named)
        .filter(|name| {
            !doc.contains(&format!("| `{name}`")) && !doc.contains(&format!("| `{name}{{"))
        })
        .collect();
    missing.sort_unstable();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "metrics without a row in docs/operations.md: {missing:?}"
    );
}

#[tokio::test]
async fn scrape_without_a_recorder_is_unavailable() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let router = common::router(pool, "2026-03-01T10:00:00Z");
    let (status, kind, _) = scrape(&router).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(kind, "application/problem+json");
}
