//! The executor routes on a real database and nats-server: `POST /runs/{key}/status`
//! (forward-only, 409 for a second executor, 404, 400) and `POST /run-launcher/start`
//! (idempotent by key), plus `/readyz` with NATS.

use crate::common;

use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use common::{call, EXECUTOR, READER};
use kairos_api::{app, AppState};
use kairos_auth::{AuthConfig, AuthMode, Authenticator, Role, StaticToken};
use kairos_launcher::{NatsConfig, NatsLink};
use kairos_registrar::{Registrar, Settings};
use kairos_store::PgPool;
use kairos_testkit::NatsServer;
use kairos_worker::dispatcher::{Dispatcher, DispatcherConfig};
use kairos_worker::intake::Intake;
use serde_json::json;
use sha2::{Digest, Sha256};

const KEY: &str = "order-42";

async fn api(pool: PgPool, nats: &NatsServer) -> axum::Router {
    let tokens = [
        ("executor", Role::Executor, EXECUTOR),
        ("reader", Role::Reader, READER),
    ];
    let auth = AuthConfig {
        mode: AuthMode::Tokens,
        tokens: tokens
            .iter()
            .map(|(name, role, secret)| StaticToken {
                name: (*name).into(),
                role: *role,
                sha256: hex::encode(Sha256::digest(secret)),
            })
            .collect(),
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
        metrics: None,
        status_subjects: kairos_launcher::status::StatusSubjects {
            prefix: "kairos".into(),
            partitions: 16,
        },
    })
}

async fn workflow(pool: &PgPool) {
    sqlx::query("insert into workflows (workflow_id, version, dag) values ('wf', 1, $1)")
        .bind(json!({"nodes": [{"id": "a"}]}))
        .execute(pool)
        .await
        .expect("workflow");
}

fn start_body(key: &str) -> serde_json::Value {
    json!({"workflow_id": "wf", "version": 1, "user_id": "u",
           "scheduled_for": "2026-03-09T07:00:00Z", "idempotency_key": key})
}

#[tokio::test]
async fn run_launcher_start_is_idempotent_and_status_moves_forward() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let nats = NatsServer::start();
    let api = api(pool.clone(), &nats).await;
    workflow(&pool).await;
    let start = |body| {
        call(
            &api,
            Method::POST,
            "/run-launcher/start",
            Some(EXECUTOR),
            Some(body),
        )
    };
    let (status, _, body) = start(start_body(KEY)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"started": true, "status": "ENQUEUED"}));
    let (_, _, body) = start(start_body(KEY)).await;
    assert_eq!(body["started"], json!(false));
    let (status, _, body) = start(start_body(&"a".repeat(64))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["errors"][0]["field"], json!("idempotency_key"));

    let uri = format!("/runs/{KEY}/status");
    let post = |body| call(&api, Method::POST, &uri, Some(EXECUTOR), Some(body));
    let (status, _, run) = post(json!({"status": "STARTED", "executor_id": "e1"})).await;
    assert_eq!(
        (status, run["status"].clone()),
        (StatusCode::OK, json!("STARTED"))
    );
    let (status, kind, _) = post(json!({"status": "STARTED", "executor_id": "e2"})).await;
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::CONFLICT, "application/problem+json")
    );
    let (_, _, run) = post(json!({"status": "SUCCESS", "executor_id": "e1"})).await;
    assert_eq!(run["status"], json!("SUCCESS"));
    let (status, _, run) = post(json!({"status": "STARTED", "executor_id": "e1"})).await;
    assert_eq!(
        (status, run["status"].clone()),
        (StatusCode::OK, json!("SUCCESS"))
    );
    let (status, _, body) = post(json!({"status": "DONE"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["errors"][0]["field"], json!("status"));

    let (status, _, _) = call(
        &api,
        Method::POST,
        "/runs/nope/status",
        Some(EXECUTOR),
        Some(json!({"status": "STARTED"})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = call(
        &api,
        Method::POST,
        &uri,
        Some(READER),
        Some(json!({"status": "STARTED"})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn readyz_checks_nats() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let mut nats = NatsServer::start();
    let api = api(pool, &nats).await;
    let (status, _, body) = call(&api, Method::GET, "/readyz", None, None).await;
    assert_eq!(
        (status, body["checks"]["nats"].clone()),
        (StatusCode::OK, json!("ok"))
    );
    nats.stop();
    let (status, _, _) = call(&api, Method::GET, "/readyz", None, None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
}

/// Bug: a NUL byte in a status report was a 500 (PostgreSQL refuses NUL in text). Every text
/// field with NUL is a 400 naming it, for a known run or not; an unknown run is a 404; a run
/// that was never published is a 409 saying so. Nothing changes.
#[tokio::test]
async fn status_reports_refuse_nul_unknown_and_unpublished_runs() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let nats = NatsServer::start();
    let api = api(pool.clone(), &nats).await;
    workflow(&pool).await;
    // A run of a tick ten minutes from now: planned, never published.
    let future = "b".repeat(64);
    sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, workflow_id, \
         version, user_id) values ($1, 's', date_trunc('second', now()) + interval '10 min', \
         date_trunc('second', now()) + interval '10 min', 'wf', 1, 'u')",
    )
    .bind(&future)
    .execute(&pool)
    .await
    .expect("insert future run");
    let post = |key: String, body| {
        let api = api.clone();
        async move {
            let uri = format!("/runs/{key}/status");
            call(&api, Method::POST, &uri, Some(EXECUTOR), Some(body)).await
        }
    };
    for field in ["error", "executor_id", "run_id"] {
        for key in [future.clone(), "no-such-run".to_string()] {
            let body = json!({"status": "FAILED", field: "x\u{0}"});
            let (status, kind, body) = post(key, body).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{field}: {body}");
            assert_eq!(kind, "application/problem+json");
            assert_eq!(body["errors"][0]["field"], json!(field));
        }
    }
    let (status, _, _) = post("no-such-run".into(), json!({"status": "SUCCESS"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, body) = post(future.clone(), json!({"status": "STARTED"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("never published")),
        "{body}"
    );
    let run = kairos_store::runs::get(&pool, &future)
        .await
        .expect("read run")
        .expect("run");
    assert_eq!(run.status, kairos_core::RunStatus::Pending, "nothing moved");
    assert_eq!(run.executor_id, None);
}

/// `POST /runs/status`: one request, one answer per report in order; reports about one run
/// apply in their order; a broken, unknown or refused report is answered alone (with the
/// problem the single route would send) and the rest apply.
#[tokio::test]
async fn a_batch_of_reports_is_answered_item_by_item() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let nats = NatsServer::start();
    let api = api(pool.clone(), &nats).await;
    workflow(&pool).await;
    for key in ["b-1", "b-2"] {
        let (status, _, body) = call(
            &api,
            Method::POST,
            "/run-launcher/start",
            Some(EXECUTOR),
            Some(start_body(key)),
        )
        .await;
        assert_eq!(
            (status, body["status"].clone()),
            (StatusCode::OK, json!("ENQUEUED"))
        );
    }
    let batch = json!([
        {"idempotency_key": "b-1", "status": "STARTED", "executor_id": "e1"},
        {"idempotency_key": "b-2", "status": "STARTED", "executor_id": "e2"},
        {"idempotency_key": "b-1", "status": "SUCCESS", "executor_id": "e1"},
        {"idempotency_key": "b-2", "status": "SUCCESS", "executor_id": "intruder"},
        {"idempotency_key": "no-such-run", "status": "STARTED"},
        {"idempotency_key": "b-2", "status": "DONE"},
        {"status": "STARTED"}
    ]);
    let (status, _, body) = call(
        &api,
        Method::POST,
        "/runs/status",
        Some(EXECUTOR),
        Some(batch),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let answers = body.as_array().expect("an array");
    let codes: Vec<i64> = answers
        .iter()
        .map(|a| a["status"].as_i64().expect("a code"))
        .collect();
    assert_eq!(codes, [200, 200, 200, 409, 404, 400, 400]);
    assert_eq!(answers[0]["run"]["status"], json!("STARTED"));
    assert_eq!(answers[2]["run"]["status"], json!("SUCCESS"));
    assert_eq!(answers[3]["problem"]["status"], json!(409));
    assert_eq!(
        answers[5]["problem"]["errors"][0]["field"],
        json!("[5].status")
    );
    assert_eq!(
        answers[6]["problem"]["errors"][0]["field"],
        json!("[6].idempotency_key")
    );
    let status_of = |key: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, String>(
                "select status from schedule_runs where idempotency_key = $1",
            )
            .bind(key)
            .fetch_one(&pool)
            .await
            .expect("run")
        }
    };
    assert_eq!(status_of("b-1").await, "SUCCESS");
    assert_eq!(
        status_of("b-2").await,
        "STARTED",
        "the intruder changed nothing"
    );

    for bad in [
        json!([]),
        json!({"status": "STARTED"}),
        json!(vec![json!({}); 1001]),
    ] {
        let (status, _, body) = call(
            &api,
            Method::POST,
            "/runs/status",
            Some(EXECUTOR),
            Some(bad),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(body["errors"][0]["field"], json!("body"));
    }
}
