//! `/calendars` and the calendar fields of upsert and preview through the router on a real
//! database: CRUD, refusals as problem+json naming the field, delete refused while in use,
//! and the preview's `excluded` and `explained` answers.

use crate::common;

use axum::http::{Method, StatusCode};
use common::*;
use kairos_testkit::TestDb;
use serde_json::json;

const NOW: &str = "2026-01-05T00:00:00Z";

#[tokio::test]
async fn calendars_are_stored_listed_used_and_deleted_only_when_unused() {
    let db = TestDb::new().await;
    let router = router(db.pool(), NOW);
    deploy_workflow(&router, "report", 3).await;
    let body =
        json!({ "dates": ["2026-12-25", "2026-12-24", "2026-12-25"], "description": "xmas" });
    let (status, _, answer) = call(
        &router,
        Method::PUT,
        "/calendars/xmas",
        Some(DEPLOYER),
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(answer["dates"], json!(["2026-12-24", "2026-12-25"]));
    let (status, _, answer) = call(&router, Method::GET, "/calendars", Some(DEPLOYER), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["calendars"][0]["name"], "xmas");

    let mut schedule = seed_body();
    schedule["exclude_calendars"] = json!(["xmas"]);
    schedule["exclude"] = json!(["* * * * SAT,SUN"]);
    schedule["roll"] = json!("forward");
    let (status, _, answer) = call(
        &router,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        Some(schedule),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    let (_, _, shown) = call(
        &router,
        Method::GET,
        "/schedules/nightly-report",
        Some(DEPLOYER),
        None,
    )
    .await;
    assert_eq!(shown["exclude_calendars"], json!(["xmas"]));
    assert_eq!(shown["roll"], "forward");
    assert_eq!(shown["dst_gap"], json!(null));

    let (status, kind, answer) = call(
        &router,
        Method::DELETE,
        "/calendars/xmas",
        Some(DEPLOYER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    assert_eq!(kind, "application/problem+json");
    let (status, _, answer) = call(
        &router,
        Method::PUT,
        "/calendars/xmas",
        Some(DEPLOYER),
        Some(json!({ "dates": ["2026-12-31"] })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["replanned"], json!(["nightly-report"]));
    call(
        &router,
        Method::DELETE,
        "/schedules/nightly-report",
        Some(DEPLOYER),
        None,
    )
    .await;
    let (status, _, _) = call(
        &router,
        Method::DELETE,
        "/calendars/xmas",
        Some(DEPLOYER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _, _) = call(
        &router,
        Method::GET,
        "/calendars/xmas",
        Some(DEPLOYER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn bad_calendar_input_is_a_problem_naming_the_field_and_stores_nothing() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let router = router(pool.clone(), NOW);
    deploy_workflow(&router, "report", 3).await;
    let cases = [
        (
            "/calendars/c",
            json!({ "dates": ["2026-02-30"] }),
            "dates[0]",
        ),
        ("/calendars/c", json!({ "dates": [5] }), "dates[0]"),
        ("/calendars/c", json!({}), "dates"),
    ];
    for (uri, body, field) in cases {
        let (status, kind, answer) =
            call(&router, Method::PUT, uri, Some(DEPLOYER), Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        assert_eq!(kind, "application/problem+json");
        assert!(answer.to_string().contains(field), "{field}: {answer}");
    }
    let upserts = [
        (
            json!({ "exclude": ["2026-12-26..2026-12-24"] }),
            "exclude[0]",
        ),
        (
            json!({ "exclude_calendars": ["missing"] }),
            "exclude_calendars[0]",
        ),
        (json!({ "exclude": ["* * * * *"] }), "exclude"),
        (json!({ "roll": "sideways" }), "roll"),
    ];
    for (extra, field) in upserts {
        let mut body = seed_body();
        for (key, value) in extra.as_object().expect("object") {
            body[key] = value.clone();
        }
        let (status, _, answer) = call(
            &router,
            Method::POST,
            "/schedules/upsert",
            Some(DEPLOYER),
            Some(body),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        assert!(answer.to_string().contains(field), "{field}: {answer}");
    }
    assert_eq!(
        table_counts(&pool).await,
        (0, 0, 1),
        "only the deployed workflow"
    );
}

#[tokio::test]
async fn preview_honours_calendar_fields_and_explains_them() {
    let db = TestDb::new().await;
    let router = router(db.pool(), NOW);
    call(
        &router,
        Method::PUT,
        "/calendars/uk",
        Some(DEPLOYER),
        Some(json!({ "dates": ["2026-01-01"] })),
    )
    .await;
    let body = json!({
        "cron_expr": "0 9 1 * *", "timezone": "Europe/London", "count": 2,
        "after": "2025-12-15T00:00:00Z",
        "exclude": ["* * * * SAT,SUN"], "exclude_calendars": ["uk"], "roll": "forward"
    });
    let (status, _, answer) = call(
        &router,
        Method::POST,
        "/schedules/preview",
        Some(DEPLOYER),
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(
        answer["fire_times"],
        json!(["2026-01-02T09:00:00Z", "2026-02-02T09:00:00Z"])
    );
    assert_eq!(
        answer["explained"][0]["rolled_from"],
        "2026-01-01T09:00:00Z"
    );
    assert_eq!(
        answer["explained"][1]["rolled_from"],
        "2026-02-01T09:00:00Z"
    );

    let body = json!({
        "cron_expr": "0 9 * * *", "timezone": "UTC", "count": 2,
        "after": "2026-01-01T00:00:00Z", "exclude": ["2026-01-02"]
    });
    let (_, _, answer) = call(
        &router,
        Method::POST,
        "/schedules/preview",
        Some(DEPLOYER),
        Some(body),
    )
    .await;
    assert_eq!(
        answer["fire_times"],
        json!(["2026-01-01T09:00:00Z", "2026-01-03T09:00:00Z"])
    );
    assert_eq!(
        answer["excluded"],
        json!([{ "at": "2026-01-02T09:00:00Z", "by": "exclude 2026-01-02" }])
    );

    let body = json!({
        "cron_expr": "30 1 * * *", "timezone": "America/New_York", "count": 1,
        "after": "2025-11-02T00:00:00Z", "dst_fold": "last"
    });
    let (_, _, answer) = call(
        &router,
        Method::POST,
        "/schedules/preview",
        Some(DEPLOYER),
        Some(body),
    )
    .await;
    assert_eq!(answer["fire_times"], json!(["2025-11-02T06:30:00Z"]));
    assert_eq!(answer["explained"][0]["dst"]["rule"], "dst_fold=last");
    assert_eq!(answer["explained"][0]["dst"]["source"], "schedule");
}
