//! Every route of the API against a real PostgreSQL (one database per test), through the
//! real router with `oneshot`: answers, status codes, auth by role, and the OpenAPI document
//! kept equal to the router.

use crate::common;

use kairos_testkit::TestDb;
use std::collections::BTreeSet;

use axum::http::{Method, StatusCode};
use common::*;
use kairos_core::{RunKey, RunSource, RunStatus};
use kairos_store::runs::{self, NewRun};
use serde_json::{json, Value};

const NOW: &str = "2026-03-08T12:00:00Z";

#[tokio::test]
async fn seed_upsert_then_get_shows_five_preview_times() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool, NOW);
    deploy_workflow(&api, "report", 3).await;
    let (status, _, body) = call(
        &api,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        Some(seed_body()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        body,
        json!({"schedule_id": "nightly-report", "next_run_at": "2026-03-09T11:00:00Z",
               "revision": 1, "outcome": "created"})
    );
    let (status, _, body) = call(
        &api,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        Some(seed_body()),
    )
    .await;
    assert_eq!(
        (status, body["revision"].clone(), body["outcome"].clone()),
        (StatusCode::OK, json!(1), json!("unchanged"))
    );
    // A window written with more digits than the database keeps (microseconds) is the
    // same window the second time: the upsert changes nothing and keeps the revision.
    let mut precise = seed_body();
    precise["start_at"] = json!("2026-03-01T00:00:00.1234567Z");
    for (answer, revision) in [(StatusCode::OK, 2), (StatusCode::OK, 2)] {
        let (status, _, body) = call(
            &api,
            Method::POST,
            "/schedules/upsert",
            Some(DEPLOYER),
            Some(precise.clone()),
        )
        .await;
        assert_eq!(
            (status, body["revision"].clone()),
            (answer, json!(revision)),
            "{body}"
        );
    }
    let (status, _, body) = call(
        &api,
        Method::GET,
        "/schedules/nightly-report",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body["preview"],
        json!([
            "2026-03-09T11:00:00Z",
            "2026-03-10T11:00:00Z",
            "2026-03-11T11:00:00Z",
            "2026-03-12T11:00:00Z",
            "2026-03-13T11:00:00Z"
        ])
    );
    assert_eq!(
        (body["workflow_id"].clone(), body["overlap_policy"].clone()),
        (json!("report"), json!("skip"))
    );
    assert_eq!(body["created_at"], json!(NOW));
    let (status, kind, body) =
        call(&api, Method::GET, "/schedules/missing", Some(READER), None).await;
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::NOT_FOUND, "application/problem+json")
    );
    assert_eq!(body["status"], json!(404));
}

async fn upsert(api: &axum::Router, id: &str, workflow: &str, user: &str) {
    deploy_workflow(api, workflow, 1).await;
    let body = json!({"schedule_id": id, "workflow_id": workflow, "version": 1, "user_id": user,
                      "cron_expr": "*/5 * * * *", "timezone": "UTC"});
    upsert_new(api, body).await;
}

#[tokio::test]
async fn list_filters_and_paginates_with_a_cursor() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool, NOW);
    for (id, workflow, user) in [
        ("a1", "wa", "u1"),
        ("a2", "wa", "u2"),
        ("a3", "wa", "u1"),
        ("b1", "wb", "u1"),
    ] {
        upsert(&api, id, workflow, user).await;
    }
    call(
        &api,
        Method::POST,
        "/schedules/pause",
        Some(DEPLOYER),
        Some(json!({"schedule_id": "a3", "paused": true})),
    )
    .await;
    let ids = |body: &Value| -> Vec<String> {
        body["schedules"]
            .as_array()
            .expect("array")
            .iter()
            .map(|s| s["schedule_id"].as_str().expect("id").to_string())
            .collect()
    };
    let (_, _, page) = call(
        &api,
        Method::GET,
        "/schedules?workflow_id=wa&limit=2",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(
        (ids(&page), page["next_cursor"].clone()),
        (vec!["a1".to_string(), "a2".into()], json!("a2"))
    );
    let (_, _, page) = call(
        &api,
        Method::GET,
        "/schedules?workflow_id=wa&limit=2&cursor=a2",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(
        (ids(&page), page["next_cursor"].clone()),
        (vec!["a3".to_string()], Value::Null)
    );
    let (_, _, page) = call(
        &api,
        Method::GET,
        "/schedules?user_id=u1&paused=false",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(ids(&page), ["a1", "b1"]);
    let (status, _, page) = call(&api, Method::GET, "/schedules?limit=0", Some(READER), None).await;
    assert_eq!(
        (status, page["errors"][0]["field"].clone()),
        (StatusCode::BAD_REQUEST, json!("limit"))
    );
}

#[tokio::test]
async fn runs_are_listed_newest_first_and_filtered_by_status() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    upsert(&api, "s1", "wa", "u1").await;
    for (at, status) in [
        ("2026-03-08T10:00:00Z", RunStatus::Skipped),
        ("2026-03-08T11:00:00Z", RunStatus::Pending),
        ("2026-03-08T09:00:00Z", RunStatus::Pending),
    ] {
        let run_at = ts(at);
        let run = NewRun {
            idempotency_key: RunKey::tick("s1", run_at).as_str().to_string(),
            schedule_id: "s1".into(),
            run_at,
            fire_at: run_at,
            status,
            source: RunSource::Schedule,
            overlap: None,
            workflow_id: "wa".into(),
            version: 1,
            user_id: "u1".into(),
        };
        runs::insert(&pool, &run, run_at).await.expect("insert run");
    }
    let (status, _, body) = call(&api, Method::GET, "/schedules/s1/runs", Some(READER), None).await;
    assert_eq!(status, StatusCode::OK);
    let run_ats: Vec<&str> = body["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["run_at"].as_str().expect("run_at"))
        .collect();
    assert_eq!(
        run_ats,
        [
            "2026-03-08T11:00:00Z",
            "2026-03-08T10:00:00Z",
            "2026-03-08T09:00:00Z"
        ]
    );
    let (_, _, body) = call(
        &api,
        Method::GET,
        "/schedules/s1/runs?status=PENDING&limit=1",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(body["runs"].as_array().expect("runs").len(), 1);
    assert_eq!(body["runs"][0]["run_at"], json!("2026-03-08T11:00:00Z"));

    // A page at a time: every run once, in order, and the last page says so.
    let mut paged = Vec::new();
    let mut uri = "/schedules/s1/runs?limit=2".to_string();
    loop {
        let (status, _, body) = call(&api, Method::GET, &uri, Some(READER), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        for run in body["runs"].as_array().expect("runs") {
            paged.push(run["run_at"].as_str().expect("run_at").to_string());
        }
        match body["next_cursor"].as_str() {
            Some(cursor) => uri = format!("/schedules/s1/runs?limit=2&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(paged, run_ats);
    let (status, _, body) = call(
        &api,
        Method::GET,
        "/schedules/s1/runs?cursor=not-a-cursor",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(
        (status, body["errors"][0]["field"].clone()),
        (StatusCode::BAD_REQUEST, json!("cursor"))
    );
    let (status, _, body) = call(
        &api,
        Method::GET,
        "/schedules/s1/runs?status=DONE",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(
        (status, body["errors"][0]["field"].clone()),
        (StatusCode::BAD_REQUEST, json!("status"))
    );
}

#[tokio::test]
async fn pause_resume_and_delete() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    upsert(&api, "s1", "wa", "u1").await;
    let pause = |paused: bool| json!({"schedule_id": "s1", "paused": paused});
    let (status, _, body) = call(
        &api,
        Method::POST,
        "/schedules/pause",
        Some(DEPLOYER),
        Some(pause(true)),
    )
    .await;
    assert_eq!((status, body), (StatusCode::NO_CONTENT, Value::Null));
    let (_, _, body) = call(&api, Method::GET, "/schedules/s1", Some(READER), None).await;
    assert_eq!(body["paused"], json!(true));
    let (status, _, _) = call(
        &api,
        Method::POST,
        "/schedules/pause",
        Some(DEPLOYER),
        Some(pause(false)),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, _, body) = call(&api, Method::GET, "/schedules/s1", Some(READER), None).await;
    assert_eq!(
        (body["paused"].clone(), body["next_run_at"].clone()),
        (json!(false), json!("2026-03-08T12:00:00Z"))
    );
    let unknown = json!({"schedule_id": "nope", "paused": true});
    let (status, _, _) = call(
        &api,
        Method::POST,
        "/schedules/pause",
        Some(DEPLOYER),
        Some(unknown),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = call(&api, Method::DELETE, "/schedules/s1", Some(DEPLOYER), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _, _) = call(&api, Method::DELETE, "/schedules/s1", Some(DEPLOYER), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(table_counts(&pool).await.0, 0);
}

#[tokio::test]
async fn preview_answers_fire_times_and_stores_nothing() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    let body = json!({"cron_expr": "30 1 * * *", "timezone": "Europe/Berlin", "count": 3, "after": "2026-03-28T00:00:00Z"});
    let (status, _, answer) = call(
        &api,
        Method::POST,
        "/schedules/preview",
        Some(READER),
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    // Berlin switches to CEST at 02:00 on 2026-03-29: 01:30 CET is 00:30Z until then, and
    // 01:30 CEST on the 30th is 23:30Z on the 29th.
    assert_eq!(
        answer["fire_times"],
        json!([
            "2026-03-28T00:30:00Z",
            "2026-03-29T00:30:00Z",
            "2026-03-29T23:30:00Z"
        ])
    );
    assert_eq!(table_counts(&pool).await, (0, 0, 0));
}

#[tokio::test]
async fn weekday_names_preview_and_upsert() {
    // `W` in `WED` was once read as the nearest-weekday modifier and refused.
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    deploy_workflow(&api, "report", 3).await;
    // NOW is Sunday 2026-03-08. Wednesday midnight in Berlin is 23:00Z the day before
    // (CET) until the clocks go forward on the 29th, then 22:00Z (CEST).
    let body =
        json!({"cron_expr": "0 0 * * WED", "timezone": "Europe/Berlin", "count": 4, "after": NOW});
    let (status, _, answer) = call(
        &api,
        Method::POST,
        "/schedules/preview",
        Some(READER),
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(
        answer["fire_times"],
        json!([
            "2026-03-10T23:00:00Z",
            "2026-03-17T23:00:00Z",
            "2026-03-24T23:00:00Z",
            "2026-03-31T22:00:00Z"
        ])
    );
    let mut upsert = seed_body();
    upsert["cron_expr"] = json!("0 0 * * mon-WED");
    upsert["timezone"] = json!("UTC");
    let (status, _, body) = call(
        &api,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        Some(upsert),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["next_run_at"], json!("2026-03-09T00:00:00Z"));
    let (status, _, body) = call(
        &api,
        Method::GET,
        "/schedules/nightly-report",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body["preview"],
        json!([
            "2026-03-09T00:00:00Z",
            "2026-03-10T00:00:00Z",
            "2026-03-11T00:00:00Z",
            "2026-03-16T00:00:00Z",
            "2026-03-17T00:00:00Z"
        ])
    );
}

fn dag() -> Value {
    json!({"nodes": [{"id": "extract"}, {"id": "load", "depends_on": ["extract"]}]})
}

#[tokio::test]
async fn workflow_versions_store_once_and_sync_schedules() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    let deploy = |schedules: Value| json!({"dag": dag(), "schedules": schedules});
    let first = deploy(json!([
        {"schedule_id": "daily", "user_id": "u1", "cron_expr": "0 6 * * *", "timezone": "UTC"},
        {"schedule_id": "hourly", "user_id": "u1", "cron_expr": "0 * * * *", "timezone": "UTC"}
    ]));
    let (status, _, body) = call(
        &api,
        Method::PUT,
        "/workflows/etl/versions/1",
        Some(DEPLOYER),
        Some(first),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        body["schedules"][0],
        json!({"schedule_id": "daily", "next_run_at": "2026-03-09T06:00:00Z", "revision": 1})
    );
    let second = deploy(
        json!([{"schedule_id": "daily", "user_id": "u1", "cron_expr": "0 7 * * *", "timezone": "UTC"}]),
    );
    let (status, _, body) = call(
        &api,
        Method::PUT,
        "/workflows/etl/versions/1",
        Some(DEPLOYER),
        Some(second),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (
            body["removed"].clone(),
            body["schedules"][0]["revision"].clone()
        ),
        (json!(["hourly"]), json!(2))
    );
    let (status, _, body) = call(
        &api,
        Method::GET,
        "/workflows/etl/versions/1",
        Some(READER),
        None,
    )
    .await;
    assert_eq!((status, body["dag"].clone()), (StatusCode::OK, dag()));
    let other = json!({"dag": {"nodes": [{"id": "other"}]}});
    let (status, kind, _) = call(
        &api,
        Method::PUT,
        "/workflows/etl/versions/1",
        Some(DEPLOYER),
        Some(other),
    )
    .await;
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::CONFLICT, "application/problem+json")
    );
    let (status, _, _) = call(
        &api,
        Method::GET,
        "/workflows/etl/versions/2",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(table_counts(&pool).await, (1, 0, 1));
}

#[tokio::test]
async fn a_failing_schedule_leaves_the_deployed_set_untouched() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    let good = json!({"dag": dag(), "schedules": [{"schedule_id": "keep", "user_id": "u1", "cron_expr": "0 6 * * *", "timezone": "UTC"}]});
    call(
        &api,
        Method::PUT,
        "/workflows/etl/versions/1",
        Some(DEPLOYER),
        Some(good),
    )
    .await;
    let (before, _, stored_before) =
        call(&api, Method::GET, "/schedules/keep", Some(READER), None).await;
    assert_eq!(before, StatusCode::OK);
    let bad = json!({"dag": dag(), "schedules": [
        {"schedule_id": "keep", "user_id": "u1", "cron_expr": "0 9 * * *", "timezone": "UTC"},
        {"schedule_id": "new", "user_id": "u1", "cron_expr": "0 9 * * *", "timezone": "Mars/Olympus"}
    ]});
    let (status, _, body) = call(
        &api,
        Method::PUT,
        "/workflows/etl/versions/2",
        Some(DEPLOYER),
        Some(bad),
    )
    .await;
    assert_eq!(
        (status, body["errors"][0]["field"].clone()),
        (StatusCode::BAD_REQUEST, json!("schedules[1].timezone"))
    );
    let (_, _, stored_after) = call(&api, Method::GET, "/schedules/keep", Some(READER), None).await;
    assert_eq!(stored_after["revision"], stored_before["revision"]);
    assert_eq!(stored_after["cron_expr"], json!("0 6 * * *"));
    assert_eq!(
        table_counts(&pool).await,
        (1, 0, 1),
        "neither version 2 nor schedule `new` stored"
    );
}

#[tokio::test]
async fn health_routes_are_open_and_ready_checks_postgres() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool, NOW);
    let (status, _, body) = call(&api, Method::GET, "/healthz", None, None).await;
    assert_eq!(
        (status, body["status"].clone()),
        (StatusCode::OK, json!("ok"))
    );
    let (status, _, body) = call(&api, Method::GET, "/readyz", None, None).await;
    assert_eq!(
        (status, body["checks"]["postgres"].clone()),
        (StatusCode::OK, json!("ok"))
    );
    let (status, kind, _) = call(&api, Method::GET, "/nowhere", None, None).await;
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::NOT_FOUND, "application/problem+json")
    );
}

#[tokio::test]
async fn every_route_checks_the_token_and_the_role() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    for route in kairos_api::routes() {
        let uri = route
            .path
            .replace("{id}", "x")
            .replace("{key}", "x")
            .replace("{version}", "1");
        let Some(role) = route.role else { continue };
        let (status, kind, _) = call(&api, route.method.clone(), &uri, None, Some(json!({}))).await;
        assert_eq!(
            (status, kind.as_str()),
            (StatusCode::UNAUTHORIZED, "application/problem+json"),
            "{uri}"
        );
        let (status, _, _) = call(
            &api,
            route.method.clone(),
            &uri,
            Some("wrong-token"),
            Some(json!({})),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{uri}");
        let refused = if role == kairos_auth::Role::Reader {
            None
        } else {
            Some(READER)
        };
        if let Some(token) = refused {
            let (status, _, _) = call(
                &api,
                route.method.clone(),
                &uri,
                Some(token),
                Some(json!({})),
            )
            .await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{uri}");
        }
        for token in [DEPLOYER, EXECUTOR, READER] {
            let (status, _, _) = call(
                &api,
                route.method.clone(),
                &uri,
                Some(token),
                Some(json!({})),
            )
            .await;
            let allowed = role == kairos_auth::Role::Reader
                || (role == kairos_auth::Role::Deployer && token == DEPLOYER)
                || (role == kairos_auth::Role::Executor && token == EXECUTOR);
            assert_eq!(
                status != StatusCode::FORBIDDEN,
                allowed,
                "{uri} with {token}"
            );
        }
    }
    let (status, _, _) = call(
        &api,
        Method::POST,
        "/schedules/upsert",
        Some(EXECUTOR),
        Some(seed_body()),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(table_counts(&pool).await, (0, 0, 0));
}

#[test]
fn openapi_document_matches_the_router() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../schemas/openapi.json"
    ))
    .expect("openapi.json");
    let doc: Value = serde_json::from_str(&text).expect("openapi.json is JSON");
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            documented.insert((method.to_uppercase(), path.clone()));
        }
    }
    let served: BTreeSet<(String, String)> = kairos_api::routes()
        .iter()
        .map(|r| (r.method.to_string(), r.path.to_string()))
        .collect();
    assert_eq!(documented, served);
    for route in kairos_api::routes() {
        let op = &doc["paths"][route.path][route.method.as_str().to_lowercase()];
        // A route open to anyone says so; one that needs a role takes the document's default
        // (a bearer token, or none where the server runs with `auth.mode = none`).
        let expected = if route.role.is_none() {
            json!([])
        } else {
            Value::Null
        };
        assert_eq!(
            op["security"], expected,
            "{} {}: security must match auth",
            route.method, route.path
        );
    }
}
