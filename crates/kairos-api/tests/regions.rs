//! A schedule's `region` and `fallback_regions` through the API on a real database: each
//! broken rule is a 400 naming the field (nothing written), a valid pair is stored, shown by
//! `GET /schedules/{id}`, changed by another upsert and recorded in the schedule's history;
//! a deploy's schedules take them too.

use crate::common;

use axum::http::{Method, StatusCode};
use common::{call, router_with, ts, DEPLOYER, READER};
use kairos_registrar::Settings;
use kairos_testkit::TestDb;
use serde_json::{json, Value};

const NOW: &str = "2026-03-05T12:00:00Z";

fn settings(regions: &[&str]) -> Settings {
    Settings {
        pinned_now: Some(ts(NOW)),
        regions: regions.iter().map(|r| r.to_string()).collect(),
        ..Settings::default()
    }
}

fn schedule(region: Value, fallbacks: Value) -> Value {
    json!({"schedule_id": "s1", "workflow_id": "wa", "version": 1, "user_id": "u1",
           "cron_expr": "0 7 * * *", "timezone": "UTC", "region": region,
           "fallback_regions": fallbacks})
}

async fn upsert(api: &axum::Router, body: Value) -> (StatusCode, Value) {
    let (status, _, answer) = call(
        api,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        Some(body),
    )
    .await;
    (status, answer)
}

#[tokio::test]
async fn regions_are_checked_stored_shown_and_recorded() {
    let db = TestDb::new().await;
    let api = router_with(db.pool(), settings(&["eu", "us", "ap"]));
    common::deploy_workflow(&api, "wa", 1).await;
    let refused = [
        (
            json!("mars"),
            json!([]),
            "region",
            "not a region of this deployment",
        ),
        (json!("EU"), json!([]), "region", "not a region name"),
        (
            json!(null),
            json!(["us"]),
            "fallback_regions",
            "needs region",
        ),
        (
            json!("eu"),
            json!(["eu"]),
            "fallback_regions[0]",
            "own region",
        ),
        (
            json!("eu"),
            json!(["us", "us"]),
            "fallback_regions[1]",
            "listed twice",
        ),
        (json!("eu"), json!("us"), "fallback_regions", "array"),
    ];
    for (region, fallbacks, field, rule) in refused {
        let (status, answer) = upsert(&api, schedule(region.clone(), fallbacks.clone())).await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{region} {fallbacks}: {answer}"
        );
        let error = &answer["errors"][0];
        assert_eq!(error["field"], field, "{answer}");
        assert!(
            error["rule"]
                .as_str()
                .is_some_and(|text| text.contains(rule)),
            "{answer}"
        );
    }
    let (status, _, _) = call(&api, Method::GET, "/schedules/s1", Some(READER), None).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a refused write changes nothing"
    );

    let (status, answer) = upsert(&api, schedule(json!("eu"), json!(["us", "ap"]))).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    let (_, _, body) = call(&api, Method::GET, "/schedules/s1", Some(READER), None).await;
    assert_eq!(
        (&body["region"], &body["fallback_regions"]),
        (&json!("eu"), &json!(["us", "ap"]))
    );

    let (status, answer) = upsert(&api, schedule(json!("us"), json!(null))).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (_, _, body) = call(&api, Method::GET, "/schedules/s1", Some(READER), None).await;
    assert_eq!(
        (&body["region"], &body["fallback_regions"]),
        (&json!("us"), &json!([]))
    );
    let uri = "/schedules/s1/history";
    let (_, _, history) = call(&api, Method::GET, uri, Some(READER), None).await;
    let newest = &history["history"][0]["changes"];
    assert_eq!(
        newest,
        &json!([
            {"field": "region", "old": "eu", "new": "us"},
            {"field": "fallback_regions", "old": ["us", "ap"], "new": []}
        ]),
        "{history}"
    );
}

#[tokio::test]
async fn a_deployment_without_regions_refuses_one_and_a_deploy_takes_them() {
    let db = TestDb::new().await;
    let plain = router_with(db.pool(), settings(&[]));
    common::deploy_workflow(&plain, "wa", 1).await;
    let (status, answer) = upsert(&plain, schedule(json!("eu"), json!([]))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(answer["errors"][0]["rule"]
        .as_str()
        .is_some_and(|rule| rule.contains("no regions")));

    let api = router_with(db.pool(), settings(&["eu", "us"]));
    let deploy = json!({"dag": {"nodes": [{"id": "a"}]}, "schedules": [
        {"schedule_id": "d1", "user_id": "u1", "cron_expr": "0 7 * * *", "timezone": "UTC",
         "region": "us", "fallback_regions": ["eu"]},
        {"schedule_id": "d2", "user_id": "u1", "cron_expr": "0 8 * * *", "timezone": "UTC"}
    ]});
    let uri = "/workflows/wd/versions/1";
    let (status, _, answer) = call(&api, Method::PUT, uri, Some(DEPLOYER), Some(deploy)).await;
    assert!(status.is_success(), "{status}: {answer}");
    let (_, _, d1) = call(&api, Method::GET, "/schedules/d1", Some(READER), None).await;
    assert_eq!(
        (&d1["region"], &d1["fallback_regions"]),
        (&json!("us"), &json!(["eu"]))
    );
    let (_, _, d2) = call(&api, Method::GET, "/schedules/d2", Some(READER), None).await;
    assert_eq!(
        (&d2["region"], &d2["fallback_regions"]),
        (&Value::Null, &json!([]))
    );
}
