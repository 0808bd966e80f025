//! Measures upsert latency (p50/p99 over 1,000 calls through the real router) and a deploy
//! sync of 10,000 schedules (create, identical re-deploy, all changed), against the
//! PostgreSQL at KAIROS_TEST_DATABASE_URL (`.cargo/config.toml`) in a scratch database it creates and drops.
//!
//! `cargo run --release -p kairos-api --example bench_registrar`

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use axum::Router;
use kairos_api::{app, AppState};
use kairos_auth::{AuthConfig, Authenticator};
use kairos_registrar::{Registrar, Settings};
use kairos_testkit::TestDb;
use serde_json::{json, Value};
use tower::ServiceExt;

const UPSERTS: usize = 1_000;
const SYNC_SIZE: usize = 10_000;

#[tokio::main]
async fn main() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let auth = Authenticator::from_config(&AuthConfig::default()).expect("auth");
    let state = AppState {
        intake: kairos_worker::intake::Intake::new(pool.clone()),
        nats: None,
        registrar: Registrar::new(pool.clone(), Settings::default()),
        auth: Arc::new(auth),
        max_body_bytes: 64 << 20,
        allowed_hosts: kairos_api::AllowedHosts::for_bind(([127, 0, 0, 1], 8080).into()),
        metrics: None,
        status_subjects: kairos_launcher::status::StatusSubjects {
            prefix: "kairos".into(),
            partitions: 16,
        },
    };
    let router = app(state);
    upserts(&router).await;
    deploys(&router).await;
    drop(db);
}

async fn send(router: &Router, method: Method, uri: &str, body: &Value) -> StatusCode {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(body).expect("json")))
        .expect("request");
    router
        .clone()
        .oneshot(request)
        .await
        .expect("infallible")
        .status()
}

fn schedule(index: usize, hour: usize) -> Value {
    json!({"schedule_id": format!("s{index}"), "workflow_id": "bench", "version": 1, "user_id": "u",
           "cron_expr": format!("{} {hour} * * *", index % 60), "timezone": "America/New_York"})
}

async fn upserts(router: &Router) {
    let mut times = Vec::with_capacity(UPSERTS);
    for index in 0..UPSERTS {
        let started = Instant::now();
        let status = send(
            router,
            Method::POST,
            "/schedules/upsert",
            &schedule(index, 7),
        )
        .await;
        times.push(started.elapsed());
        assert_eq!(status, StatusCode::CREATED);
    }
    times.sort();
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    println!(
        "upsert (new schedule, HTTP router + PostgreSQL), {UPSERTS} sequential calls: p50 {:?}, p99 {:?}, max {:?}",
        at(0.50),
        at(0.99),
        times[times.len() - 1]
    );
}

async fn deploys(router: &Router) {
    let dag = json!({"nodes": [{"id": "a"}, {"id": "b", "depends_on": ["a"]}]});
    for (label, hour) in [
        ("create", 7),
        ("identical re-deploy", 7),
        ("all changed", 8),
    ] {
        let schedules: Vec<Value> = (0..SYNC_SIZE)
            .map(|i| {
                let mut one = schedule(i + UPSERTS, hour);
                one.as_object_mut().expect("object").remove("workflow_id");
                one.as_object_mut().expect("object").remove("version");
                one
            })
            .collect();
        let body = json!({"dag": dag, "schedules": schedules});
        let started = Instant::now();
        let status = send(router, Method::PUT, "/workflows/bench/versions/1", &body).await;
        let took: Duration = started.elapsed();
        assert!(status.is_success(), "deploy {label}: {status}");
        println!("deploy sync of {SYNC_SIZE} schedules ({label}), one transaction: {took:?}");
    }
}
