//! Every write that creates answers 201 with `Location` naming what it created (and the
//! same write again answers 200 without one), so a client can follow it without building
//! the path itself.

use crate::common;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use common::{router, seed_body, DEPLOYER};
use kairos_testkit::TestDb;
use serde_json::{json, Value};
use tower::ServiceExt;

/// Status and `Location` of one deployer request.
async fn send(
    router: &Router,
    method: Method,
    uri: &str,
    body: &Value,
) -> (StatusCode, Option<String>) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::AUTHORIZATION, format!("Bearer {DEPLOYER}"))
        .body(Body::from(serde_json::to_vec(body).expect("json")))
        .expect("request");
    let response = router.clone().oneshot(request).await.expect("infallible");
    let location = response
        .headers()
        .get(header::LOCATION)
        .map(|value| value.to_str().expect("ascii").to_string());
    (response.status(), location)
}

#[tokio::test]
async fn each_creating_write_names_what_it_created() {
    let db = TestDb::new().await;
    let app = router(db.pool(), "2026-03-09T12:00:00Z");
    let deploy = json!({"dag": {"nodes": [{"id": "a"}]}});
    for (method, uri, body, location) in [
        (
            Method::PUT,
            "/workflows/report/versions/3",
            deploy.clone(),
            "/workflows/report/versions/3",
        ),
        (
            Method::POST,
            "/schedules/upsert",
            seed_body(),
            "/schedules/nightly-report",
        ),
        (
            Method::PUT,
            "/calendars/holidays",
            json!({"dates": ["2026-12-25"]}),
            "/calendars/holidays",
        ),
    ] {
        assert_eq!(
            send(&app, method.clone(), uri, &body).await,
            (StatusCode::CREATED, Some(location.to_string())),
            "{method} {uri}"
        );
        assert_eq!(
            send(&app, method.clone(), uri, &body).await,
            (StatusCode::OK, None),
            "{method} {uri} again"
        );
    }
    let trigger = json!({"request_id": "manual-1"});
    let (status, location) = send(
        &app,
        Method::POST,
        "/schedules/nightly-report/trigger",
        &trigger,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let location = location.expect("a Location");
    assert!(location.starts_with("/runs/"), "{location}");
    let key = location.trim_start_matches("/runs/");
    let (status, _, run) = common::call(&app, Method::GET, &location, Some(DEPLOYER), None).await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["idempotency_key"], key);
    assert_eq!(
        send(
            &app,
            Method::POST,
            "/schedules/nightly-report/trigger",
            &trigger
        )
        .await,
        (StatusCode::OK, None)
    );
}

/// An upsert says what it did: `created`, then `unchanged` for the same body (nothing
/// written, the same revision), then `updated` for a changed one (a new revision).
#[tokio::test]
async fn an_upsert_answers_created_unchanged_or_updated() {
    let db = TestDb::new().await;
    let app = router(db.pool(), "2026-03-09T12:00:00Z");
    let deploy = json!({"dag": {"nodes": [{"id": "a"}]}});
    let (status, _) = send(&app, Method::PUT, "/workflows/report/versions/3", &deploy).await;
    assert_eq!(status, StatusCode::CREATED);
    let upsert = |body: Value| {
        let app = app.clone();
        async move {
            common::call(
                &app,
                Method::POST,
                "/schedules/upsert",
                Some(DEPLOYER),
                Some(body),
            )
            .await
        }
    };
    let (status, _, first) = upsert(seed_body()).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(
        (first["outcome"].as_str(), first["revision"].as_i64()),
        (Some("created"), Some(1))
    );
    let (status, _, again) = upsert(seed_body()).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(
        (again["outcome"].as_str(), again["revision"].as_i64()),
        (Some("unchanged"), Some(1))
    );
    let mut changed = seed_body();
    changed["cron_expr"] = json!("0 8 * * *");
    let (status, _, updated) = upsert(changed).await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(
        (updated["outcome"].as_str(), updated["revision"].as_i64()),
        (Some("updated"), Some(2))
    );
}
