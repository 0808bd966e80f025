//! `GET /runs` across schedules: by status, phase, schedule, workflow, source and a range of
//! ticks, newest tick first, paged by cursor; an unknown schedule is a 404, a bad filter a
//! 400 naming it. Through the router on a real database.

use crate::common;

use axum::http::{Method, StatusCode};
use axum::Router;
use chrono::{DateTime, Utc};
use common::*;
use kairos_core::{RunKey, RunSource, RunStatus};
use kairos_store::runs::{self, NewRun};
use kairos_store::PgPool;
use kairos_testkit::TestDb;
use serde_json::{json, Value};

const NOW: &str = "2026-03-09T12:00:00Z";

async fn upsert(api: &Router, id: &str, workflow: &str) {
    let body = json!({
        "schedule_id": id, "workflow_id": workflow, "version": 1, "user_id": "u",
        "cron_expr": "0 * * * *", "timezone": "UTC",
    });
    upsert_new(api, body).await;
}

/// A run of `schedule` at `run_at` in `status`, as `source`; its key.
async fn run(
    pool: &PgPool,
    schedule: &str,
    workflow: &str,
    run_at: &str,
    status: RunStatus,
    source: RunSource,
) -> String {
    let at: DateTime<Utc> = run_at.parse().expect("time");
    let key = RunKey::tick(schedule, at).as_str().to_string();
    let row = NewRun {
        idempotency_key: key.clone(),
        schedule_id: schedule.into(),
        run_at: at,
        fire_at: at,
        status,
        source,
        overlap: None,
        workflow_id: workflow.into(),
        version: 1,
        user_id: "u".into(),
    };
    assert!(runs::insert(pool, &row, at).await.expect("insert"));
    key
}

async fn keys(api: &Router, query: &str) -> (StatusCode, Vec<String>, Value) {
    let uri = format!("/runs?{query}");
    let (status, _, body) = call(api, Method::GET, &uri, Some(READER), None).await;
    let keys = body["runs"]
        .as_array()
        .map(|runs| {
            runs.iter()
                .map(|run| run["idempotency_key"].as_str().expect("key").to_string())
                .collect()
        })
        .unwrap_or_default();
    (status, keys, body)
}

#[tokio::test]
async fn runs_are_listed_across_schedules_by_every_filter() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    deploy_workflow(&api, "wf-a", 1).await;
    deploy_workflow(&api, "wf-b", 1).await;
    upsert(&api, "a", "wf-a").await;
    upsert(&api, "b", "wf-b").await;
    let (ok, manual, failed, flying) = (
        run(
            &pool,
            "a",
            "wf-a",
            "2026-03-09T08:00:00Z",
            RunStatus::Success,
            RunSource::Schedule,
        )
        .await,
        run(
            &pool,
            "a",
            "wf-a",
            "2026-03-09T09:00:00Z",
            RunStatus::Success,
            RunSource::Manual,
        )
        .await,
        run(
            &pool,
            "b",
            "wf-b",
            "2026-03-09T10:00:00Z",
            RunStatus::Failed,
            RunSource::Schedule,
        )
        .await,
        run(
            &pool,
            "b",
            "wf-b",
            "2026-03-09T11:00:00Z",
            RunStatus::Started,
            RunSource::Schedule,
        )
        .await,
    );

    let (status, all, body) = keys(&api, "").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        all,
        [
            flying.as_str(),
            failed.as_str(),
            manual.as_str(),
            ok.as_str()
        ],
        "newest tick first"
    );
    for (query, expected) in [
        ("status=SUCCESS", vec![manual.as_str(), ok.as_str()]),
        ("phase=in_flight", vec![flying.as_str()]),
        ("phase=failed", vec![failed.as_str()]),
        ("schedule_id=a", vec![manual.as_str(), ok.as_str()]),
        ("workflow_id=wf-b", vec![flying.as_str(), failed.as_str()]),
        ("source=manual", vec![manual.as_str()]),
        (
            "from=2026-03-09T09:00:00Z&to=2026-03-09T10:00:00Z",
            vec![failed.as_str(), manual.as_str()],
        ),
    ] {
        let (status, got, body) = keys(&api, query).await;
        assert_eq!(status, StatusCode::OK, "{query}: {body}");
        assert_eq!(got, expected, "{query}");
    }

    let (_, first, page) = keys(&api, "limit=3").await;
    assert_eq!(first, [flying.as_str(), failed.as_str(), manual.as_str()]);
    let cursor = page["next_cursor"].as_str().expect("a next page");
    let (_, rest, last) = keys(&api, &format!("limit=3&cursor={cursor}")).await;
    assert_eq!(rest, [ok.as_str()]);
    assert_eq!(last["next_cursor"], Value::Null);

    let (status, _, body) = keys(&api, "schedule_id=nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(
        body["detail"].as_str().unwrap_or_default().contains("nope"),
        "{body}"
    );

    for (query, field) in [
        ("status=DONE", "status"),
        ("phase=soon", "phase"),
        ("status=FAILED&phase=failed", "status"),
        ("source=cron", "source"),
        ("from=yesterday", "from"),
        ("from=2026-03-09T10:00:00Z&to=2026-03-09T09:00:00Z", "to"),
        ("phase=dead_letter&source=manual", "source"),
    ] {
        let (status, _, body) = keys(&api, query).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(body["errors"][0]["field"], field, "{query}: {body}");
    }
}
