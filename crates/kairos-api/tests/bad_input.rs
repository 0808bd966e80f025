//! Bad input of every kind (fields, bodies, workflows, paths, repeated keys): each gets a
//! clear 4xx problem naming the field, and nothing is stored (all three tables stay as they
//! were).

use crate::common;

use axum::http::{Method, StatusCode};
use chrono::Duration;
use common::*;
use kairos_registrar::{DagLimit, Settings};
use kairos_store::PgPool;
use kairos_testkit::TestDb;
use serde_json::{json, Value};

fn strict(pool: PgPool) -> axum::Router {
    router_with(
        pool,
        Settings {
            pinned_now: Some(ts("2026-03-08T12:00:00Z")),
            min_interval: Duration::seconds(60),
            allowed_zones: Some(vec!["UTC".into(), "America/New_York".into()]),
            ..Settings::default()
        },
    )
}

/// The seed body with `field` set to `value` (`Value::Null` removes it).
fn with(field: &str, value: Value) -> Value {
    let mut body = seed_body();
    match value {
        Value::Null => body.as_object_mut().expect("object").remove(field),
        value => body
            .as_object_mut()
            .expect("object")
            .insert(field.into(), value),
    };
    body
}

async fn expect_refused(
    api: &axum::Router,
    pool: &PgPool,
    method: Method,
    uri: &str,
    body: Value,
    field: &str,
) {
    let before = table_counts(pool).await;
    let (status, kind, answer) = call(api, method, uri, Some(DEPLOYER), Some(body.clone())).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body} -> {answer}");
    assert_eq!(kind, "application/problem+json");
    let fields: Vec<&str> = answer["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| e["field"].as_str().expect("field"))
        .collect();
    assert!(
        fields.contains(&field),
        "{body}: expected {field} in {fields:?}"
    );
    assert!(
        answer["detail"].as_str().expect("detail").contains(field),
        "{answer}"
    );
    assert_eq!(table_counts(pool).await, before, "{body} stored something");
}

#[tokio::test]
async fn bad_upserts_are_refused_by_field_and_store_nothing() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = strict(pool.clone());
    deploy_workflow(&api, "report", 3).await;
    let cases = [
        // A version or workflow that was never deployed: every run would fail to launch.
        (with("version", json!(4)), "version"),
        (with("workflow_id", json!("never-deployed")), "workflow_id"),
        (with("cron_expr", json!("61 * * * *")), "cron_expr"),
        (with("cron_expr", json!("@reboot")), "cron_expr"),
        (with("timezone", json!("Mars/Olympus")), "timezone"),
        (with("timezone", json!("Europe/Paris")), "timezone"),
        (
            with("end_at", json!("2026-01-01T00:00:00Z"))
                .merge("start_at", json!("2026-02-01T00:00:00Z")),
            "end_at",
        ),
        (with("jitter_ms", json!(-1)), "jitter_ms"),
        (with("jitter_ms", json!(3_600_001)), "jitter_ms"),
        (with("overlap_policy", json!("sometimes")), "overlap_policy"),
        (with("catchup_policy", json!("all")), "catchup_policy"),
        (with("schedule_id", json!("has space")), "schedule_id"),
        (with("schedule_id", json!("x".repeat(201))), "schedule_id"),
        (with("schedule_id", json!("run-launcher")), "schedule_id"),
        (with("schedule_id", json!("upsert")), "schedule_id"),
        (with("schedule_id", json!("pause")), "schedule_id"),
        (with("schedule_id", json!("preview")), "schedule_id"),
        (with("cron_expr", json!("0".repeat(1001))), "cron_expr"),
        (with("timezone", json!("A".repeat(65))), "timezone"),
        (
            with("overlap_policy", json!("s".repeat(33))),
            "overlap_policy",
        ),
        (
            with("catchup_policy", json!("n".repeat(33))),
            "catchup_policy",
        ),
        (with("workflow_id", json!("a.b")), "workflow_id"),
        (with("user_id", Value::Null), "user_id"),
        (with("cron_expr", Value::Null), "cron_expr"),
        (with("version", json!("3")), "version"),
        (with("jitter_ms", json!(1.5)), "jitter_ms"),
        (with("start_at", json!("yesterday")), "start_at"),
        (with("cron", json!("0 7 * * *")), "cron"),
        (
            with("cron_expr", json!("@at 2020-01-01T00:00:00Z")),
            "cron_expr",
        ),
        (with("end_at", json!("2026-03-08T13:00:00Z")), "cron_expr"),
        (with("cron_expr", json!("*/30 * * * * *")), "cron_expr"),
        (json!(["not", "an", "object"]), "body"),
    ];
    for (body, field) in cases {
        expect_refused(&api, &pool, Method::POST, "/schedules/upsert", body, field).await;
    }
}

trait Merge {
    fn merge(self, field: &str, value: Value) -> Value;
}

impl Merge for Value {
    fn merge(mut self, field: &str, value: Value) -> Value {
        self.as_object_mut()
            .expect("object")
            .insert(field.into(), value);
        self
    }
}

#[tokio::test]
async fn malformed_and_oversized_bodies_are_refused() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = strict(pool.clone());
    let (status, kind, answer) = call_raw(
        &api,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        b"{not json".to_vec(),
    )
    .await;
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::BAD_REQUEST, "application/problem+json")
    );
    assert_eq!(answer["errors"][0]["field"], json!("body"));
    let huge = with("user_id", json!("u".repeat(MAX_BODY)));
    let (status, kind, answer) = call(
        &api,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        Some(huge),
    )
    .await;
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, "application/problem+json")
    );
    assert!(answer["detail"]
        .as_str()
        .expect("detail")
        .contains("max_body_bytes"));
    let pause = json!({"schedule_id": "s", "paused": "yes"});
    expect_refused(
        &api,
        &pool,
        Method::POST,
        "/schedules/pause",
        pause,
        "paused",
    )
    .await;
    let preview = json!({"cron_expr": "0 7 * * *", "timezone": "UTC", "count": 1000});
    expect_refused(
        &api,
        &pool,
        Method::POST,
        "/schedules/preview",
        preview,
        "count",
    )
    .await;
    let (status, _, answer) = call(
        &api,
        Method::DELETE,
        "/schedules/bad%20id",
        Some(DEPLOYER),
        None,
    )
    .await;
    assert_eq!(
        (status, answer["errors"][0]["field"].clone()),
        (StatusCode::BAD_REQUEST, json!("schedule_id"))
    );
    let (status, _, answer) = call(
        &api,
        Method::GET,
        "/schedules?colour=red",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(
        (status, answer["errors"][0]["field"].clone()),
        (StatusCode::BAD_REQUEST, json!("colour"))
    );
}

#[tokio::test]
async fn bad_workflow_deploys_are_refused_and_store_nothing() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = strict(pool.clone());
    let node = |id: &str, deps: &[&str]| json!({"id": id, "depends_on": deps});
    let cycle =
        json!({"dag": {"nodes": [node("a", &["c"]), node("b", &["a"]), node("c", &["b"])]}});
    expect_refused(
        &api,
        &pool,
        Method::PUT,
        "/workflows/wf/versions/1",
        cycle,
        "dag",
    )
    .await;
    let duplicate = json!({"dag": {"nodes": [node("a", &[]), node("a", &[])]}});
    expect_refused(
        &api,
        &pool,
        Method::PUT,
        "/workflows/wf/versions/1",
        duplicate,
        "dag",
    )
    .await;
    let unknown = json!({"dag": {"nodes": [node("a", &["ghost"])]}});
    expect_refused(
        &api,
        &pool,
        Method::PUT,
        "/workflows/wf/versions/1",
        unknown,
        "dag",
    )
    .await;
    let dag = json!({"nodes": [node("a", &[])]});
    expect_refused(
        &api,
        &pool,
        Method::PUT,
        "/workflows/wf/versions/one",
        json!({"dag": dag}),
        "version",
    )
    .await;
    expect_refused(
        &api,
        &pool,
        Method::PUT,
        "/workflows/w.f/versions/1",
        json!({"dag": dag}),
        "workflow_id",
    )
    .await;
    expect_refused(
        &api,
        &pool,
        Method::PUT,
        "/workflows/wf/versions/1",
        json!({}),
        "dag",
    )
    .await;
    let foreign = json!({"dag": dag, "schedules": [
        {"workflow_id": "other", "user_id": "u", "cron_expr": "0 7 * * *", "timezone": "UTC"}]});
    expect_refused(
        &api,
        &pool,
        Method::PUT,
        "/workflows/wf/versions/1",
        foreign,
        "schedules[0].workflow_id",
    )
    .await;
    let twice = json!({"dag": dag, "schedules": [
        {"schedule_id": "s", "user_id": "u", "cron_expr": "0 7 * * *", "timezone": "UTC"},
        {"schedule_id": "s", "user_id": "u", "cron_expr": "0 8 * * *", "timezone": "UTC"}]});
    expect_refused(
        &api,
        &pool,
        Method::PUT,
        "/workflows/wf/versions/1",
        twice,
        "schedules[1].schedule_id",
    )
    .await;
    let wrong_type = json!({"dag": dag, "schedules": {"not": "a list"}});
    expect_refused(
        &api,
        &pool,
        Method::PUT,
        "/workflows/wf/versions/1",
        wrong_type,
        "schedules",
    )
    .await;
}

#[tokio::test]
async fn no_token_is_401_and_wrong_role_is_403() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = strict(pool.clone());
    let (status, _, _) = call(
        &api,
        Method::POST,
        "/schedules/upsert",
        None,
        Some(seed_body()),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, answer) = call(
        &api,
        Method::POST,
        "/schedules/upsert",
        Some(READER),
        Some(seed_body()),
    )
    .await;
    assert_eq!(
        (status, answer["status"].clone()),
        (StatusCode::FORBIDDEN, json!(403))
    );
    assert_eq!(table_counts(&pool).await, (0, 0, 0));
}

#[tokio::test]
async fn nul_characters_in_bodies_are_refused_by_field_and_store_nothing() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = strict(pool.clone());
    let nul = |text: &str| json!(format!("{text}\u{0}x"));
    for field in [
        "user_id",
        "workflow_id",
        "schedule_id",
        "cron_expr",
        "timezone",
    ] {
        let body = with(field, nul("a"));
        expect_refused(&api, &pool, Method::POST, "/schedules/upsert", body, field).await;
    }
    let preview = json!({"cron_expr": "0 7 * * *", "timezone": "UTC\u{0}"});
    expect_refused(
        &api,
        &pool,
        Method::POST,
        "/schedules/preview",
        preview,
        "timezone",
    )
    .await;
    let deploys = [
        (
            json!({"dag": {"nodes": [{"id": "a", "action": "run\u{0}"}]}}),
            "dag",
        ),
        (json!({"dag": {"nodes": [{"id": "a", "p\u{0}": 1}]}}), "dag"),
        (
            json!({"dag": {"nodes": [{"id": "a", "p": {"q": ["\u{0}"]}}]}}),
            "dag",
        ),
        (
            json!({"dag": {"nodes": [{"id": "a"}]}, "schedules": [
                {"schedule_id": "s", "user_id": "u\u{0}", "cron_expr": "0 7 * * *", "timezone": "UTC"}]}),
            "schedules[0].user_id",
        ),
    ];
    for (body, field) in deploys {
        expect_refused(
            &api,
            &pool,
            Method::PUT,
            "/workflows/wf/versions/1",
            body,
            field,
        )
        .await;
    }
}

#[tokio::test]
async fn a_dag_over_the_launch_message_limit_is_refused_naming_dag() {
    let db = TestDb::new().await;
    let pool = db.pool();
    // The test body limit is 16 KiB; a 1 KiB DAG limit lets an ordinary body cross it.
    let api = router_with(
        pool.clone(),
        Settings {
            pinned_now: Some(ts("2026-03-08T12:00:00Z")),
            dag_limit: DagLimit::new(1024),
            ..Settings::default()
        },
    );
    let nodes: Vec<Value> = (0..20)
        .map(|n| json!({"id": format!("node-{n}"), "action": "x".repeat(100)}))
        .collect();
    let body = json!({"dag": {"nodes": nodes}});
    let (status, kind, answer) = call(
        &api,
        Method::PUT,
        "/workflows/wf/versions/1",
        Some(DEPLOYER),
        Some(body.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(kind, "application/problem+json");
    assert_eq!(answer["errors"][0]["field"], "dag", "{answer}");
    let rule = answer["errors"][0]["rule"].as_str().expect("rule");
    assert!(rule.contains("at most 1024 bytes for the DAG"), "{rule}");
    assert_eq!(table_counts(&pool).await, (0, 0, 0));
}

/// One request without a body; answers status, content type and the raw body, so that a
/// non-JSON refusal shows up as a failed assertion rather than a parse panic.
async fn call_plain(
    api: &axum::Router,
    method: Method,
    uri: &str,
    token: &str,
) -> (StatusCode, String, Option<String>, Vec<u8>) {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let request = axum::http::Request::builder()
        .method(method)
        .uri(uri)
        .header(axum::http::header::AUTHORIZATION, format!("Bearer {token}"))
        .body(axum::body::Body::empty())
        .expect("request");
    let response = api.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let kind = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .map(|v| v.to_str().expect("ascii").to_string())
        .unwrap_or_default();
    let allow = response
        .headers()
        .get(axum::http::header::ALLOW)
        .map(|v| v.to_str().expect("ascii").to_string());
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, kind, allow, body.to_vec())
}

#[tokio::test]
async fn refusals_from_routing_and_path_parsing_are_problem_json() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = strict(pool.clone());
    let cases = [
        (
            Method::DELETE,
            "/schedules/preview",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (Method::PATCH, "/healthz", StatusCode::METHOD_NOT_ALLOWED),
        (Method::PUT, "/schedules", StatusCode::METHOD_NOT_ALLOWED),
        // Not UTF-8 once percent-decoded: the `Path` extractor refuses it.
        (Method::GET, "/schedules/%FF", StatusCode::BAD_REQUEST),
        (Method::GET, "/schedules/%FF/runs", StatusCode::BAD_REQUEST),
    ];
    for (method, uri, expected) in cases {
        let (status, kind, allow, body) = call_plain(&api, method.clone(), uri, DEPLOYER).await;
        let text = String::from_utf8_lossy(&body);
        assert_eq!(status, expected, "{method} {uri}: {text}");
        assert_eq!(kind, "application/problem+json", "{method} {uri}: {text}");
        let answer: Value = serde_json::from_slice(&body)
            .unwrap_or_else(|err| panic!("{method} {uri}: not JSON ({err}): {text}"));
        assert_eq!(answer["status"], json!(expected.as_u16()), "{answer}");
        assert!(answer["title"].is_string(), "{answer}");
        assert!(answer["detail"].is_string(), "{answer}");
        if status == StatusCode::METHOD_NOT_ALLOWED {
            assert!(allow.is_some(), "{method} {uri}: 405 without Allow");
        }
    }
    assert_eq!(table_counts(&pool).await, (0, 0, 0));
}

#[tokio::test]
async fn free_text_over_its_bound_is_refused_by_name_and_not_echoed() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = strict(pool.clone());
    let long = "1".repeat(10_000);
    let cases = [
        (
            "/schedules/upsert",
            with("cron_expr", json!(long)),
            "cron_expr",
            "1000",
        ),
        (
            "/schedules/upsert",
            with("timezone", json!(long)),
            "timezone",
            "64",
        ),
        (
            "/schedules/upsert",
            with("overlap_policy", json!(long)),
            "overlap_policy",
            "32",
        ),
        (
            "/schedules/preview",
            json!({"cron_expr": long, "timezone": "UTC"}),
            "cron_expr",
            "1000",
        ),
        (
            "/schedules/preview",
            json!({"cron_expr": "0 7 * * *", "timezone": long}),
            "timezone",
            "64",
        ),
    ];
    for (uri, body, field, limit) in cases {
        let (status, _, answer) = call(&api, Method::POST, uri, Some(DEPLOYER), Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri} {field}");
        let problems: Vec<&Value> = answer["errors"]
            .as_array()
            .expect("errors")
            .iter()
            .collect();
        assert_eq!(problems.len(), 1, "one problem for {field}: {answer}");
        assert_eq!(problems[0]["field"], json!(field));
        let rule = problems[0]["rule"].as_str().expect("rule");
        assert!(rule.contains(&format!("the limit is {limit}")), "{rule}");
        assert!(
            answer.to_string().len() < 1000,
            "{field} echoed: {} bytes",
            answer.to_string().len()
        );
    }
    let uri = format!("/schedules?workflow_id={}", "w".repeat(201));
    let (status, _, answer) = call(&api, Method::GET, &uri, Some(READER), None).await;
    assert_eq!(
        (status, answer["errors"][0]["field"].clone()),
        (StatusCode::BAD_REQUEST, json!("workflow_id"))
    );
    assert_eq!(table_counts(&pool).await, (0, 0, 0));
}

#[test]
fn every_fixed_path_under_schedules_is_a_reserved_schedule_id() {
    for route in kairos_api::routes() {
        let Some(rest) = route.path.strip_prefix("/schedules/") else {
            continue;
        };
        let first = rest.split('/').next().expect("segment");
        if !first.starts_with('{') {
            assert!(
                kairos_registrar::RESERVED_SCHEDULE_IDS.contains(&first),
                "{} {}: schedule id {first:?} is not reserved",
                route.method,
                route.path
            );
        }
    }
}

/// A JSON key given twice in one object, or a query parameter given twice, is a 400 naming
/// it, never "the last one wins"; nothing is stored.
#[tokio::test]
async fn a_key_or_parameter_given_twice_is_refused_by_name() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), "2026-03-09T12:00:00Z");
    let body = br#"{"workflow_id": "wf", "version": 1, "user_id": "u", "cron_expr": "* * * * *",
        "timezone": "UTC", "cron_expr": "0 0 * * *"}"#;
    let (status, _, problem) = call_raw(
        &api,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        body.to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "cron_expr", "{problem}");
    let deploy = br#"{"dag": {"nodes": [{"id": "a"}]},
        "schedules": [{"user_id": "u", "cron_expr": "* * * * *", "timezone": "UTC",
                       "timezone": "Europe/Paris"}]}"#;
    let (status, _, problem) = call_raw(
        &api,
        Method::PUT,
        "/workflows/wf/versions/1",
        Some(DEPLOYER),
        deploy.to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "schedules[0].timezone");
    let (status, _, problem) = call(
        &api,
        Method::GET,
        "/schedules?limit=1&limit=1000",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "limit");
    assert_eq!(table_counts(&pool).await, (0, 0, 0));
}
