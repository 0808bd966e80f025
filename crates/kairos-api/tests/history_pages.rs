//! The history listings through the router on a real database: `GET /history` and
//! `GET /schedules/{id}/history` page without gaps or repeats, filter by subject, actor,
//! kind and time, refuse bad parameters naming them; and a run keeps the schedule revision
//! that produced it.

use crate::common;
use crate::history_support;

use std::collections::HashSet;

use axum::http::{Method, StatusCode};
use axum::Router;
use common::*;
use history_support::*;
use kairos_store::PgPool;
use kairos_testkit::{sqlx, TestDb};
use serde_json::{json, Value};

const NOW: &str = "2026-03-09T12:00:00Z";

/// 30 schedules written at `first`, 5 more at `second`, by one router each.
async fn many_changes(pool: &PgPool) -> Router {
    let early = router(pool.clone(), "2026-03-01T00:00:00Z");
    deploy_workflow(&early, "report", 3).await;
    for n in 0..30 {
        let mut body = seed_body();
        body["schedule_id"] = json!(format!("s{n:02}"));
        send(
            &early,
            Method::POST,
            "/schedules/upsert",
            &format!("e{n}"),
            Some(body),
        )
        .await;
    }
    let late = router(pool.clone(), NOW);
    for n in 0..5 {
        let pause = json!({"schedule_id": format!("s{n:02}"), "paused": true});
        send(
            &late,
            Method::POST,
            "/schedules/pause",
            &format!("l{n}"),
            Some(pause),
        )
        .await;
    }
    late
}

/// Every page of `uri` (which has its filters and limit) until the last, concatenated.
async fn all_pages(router: &Router, uri: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let page_uri = match &cursor {
            Some(cursor) => format!("{uri}&cursor={cursor}"),
            None => uri.to_string(),
        };
        let page = read(router, &page_uri).await;
        seen.extend(page["history"].as_array().expect("history").iter().cloned());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return seen,
        }
    }
    panic!("more than 100 pages");
}

#[tokio::test]
async fn the_cursor_pages_without_gaps_or_repeats() {
    let db = TestDb::new().await;
    let pool = &db.pool();
    let router = many_changes(pool).await;
    let total = history_count(pool).await;
    assert_eq!(total, 1 + 30 + 5);
    let entries = all_pages(&router, "/history?limit=7").await;
    let ids: Vec<i64> = entries
        .iter()
        .map(|e| e["id"].as_i64().expect("id"))
        .collect();
    assert_eq!(ids.len() as i64, total);
    assert_eq!(
        ids.iter().collect::<HashSet<_>>().len(),
        ids.len(),
        "no repeats"
    );
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    // A schedule's own listing pages the same way.
    let mine = all_pages(&router, "/schedules/s00/history?limit=1").await;
    let kinds: Vec<&str> = mine
        .iter()
        .map(|e| e["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(kinds, ["pause", "create"]);
}

#[tokio::test]
async fn the_filters_select_by_subject_actor_kind_and_time() {
    let db = TestDb::new().await;
    let pool = &db.pool();
    let router = many_changes(pool).await;
    let count = |body: &Value| body["history"].as_array().expect("history").len();
    assert_eq!(
        count(&read(&router, "/history?kind=pause&limit=1000").await),
        5
    );
    assert_eq!(
        count(&read(&router, "/history?kind=create&limit=1000").await),
        31
    );
    assert_eq!(count(&read(&router, "/history?schedule_id=s07").await), 1);
    assert_eq!(
        count(&read(&router, "/history?workflow_id=report&limit=1000").await),
        36
    );
    assert_eq!(
        count(&read(&router, "/history?actor=compiler&limit=1000").await),
        36
    );
    assert_eq!(
        count(&read(&router, "/history?actor=someone-else").await),
        0
    );
    let late = read(&router, &format!("/history?since={NOW}&limit=1000")).await;
    assert_eq!(count(&late), 5);
    let early = read(&router, &format!("/history?until={NOW}&limit=1000")).await;
    assert_eq!(count(&early), 31);
    let both = read(
        &router,
        &format!("/history?until={NOW}&kind=create&schedule_id=s03"),
    )
    .await;
    assert_eq!(count(&both), 1);

    // Bad filters are a 400 naming the parameter.
    for (query, field) in [
        ("kind=skip-it", "kind"),
        ("cursor=abc", "cursor"),
        ("since=yesterday", "since"),
        ("limit=0", "limit"),
        ("schedule_id=a%20b", "schedule_id"),
        ("color=red", "color"),
        (
            "since=2026-03-09T00:00:00Z&until=2026-03-08T00:00:00Z",
            "until",
        ),
    ] {
        let (status, _, body) = call(
            &router,
            Method::GET,
            &format!("/history?{query}"),
            Some(READER),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(body["errors"][0]["field"], field, "{query}: {body}");
    }
}

#[tokio::test]
async fn a_run_keeps_the_schedule_revision_that_produced_it() {
    let db = TestDb::new().await;
    let pool = &db.pool();
    let router = router(pool.clone(), NOW);
    deploy_workflow(&router, "report", 3).await;
    let (_, answer) = send(
        &router,
        Method::POST,
        "/schedules/upsert",
        "u1",
        Some(seed_body()),
    )
    .await;
    let revision = answer["revision"].as_i64().expect("revision");
    let trigger = json!({"request_id": "t1"});
    let (_, run) = send(
        &router,
        Method::POST,
        "/schedules/nightly-report/trigger",
        "t1",
        Some(trigger),
    )
    .await;
    let key = run["idempotency_key"].as_str().expect("key").to_string();
    assert_eq!(run["schedule_revision"], revision);
    // A later write moves the schedule on; the run still names the revision that made it,
    // even when something tries to rewrite it.
    let (_, answer) = send(
        &router,
        Method::POST,
        "/schedules/upsert",
        "u2",
        Some(upsert_body("0 9 * * *")),
    )
    .await;
    assert!(answer["revision"].as_i64().expect("revision") > revision);
    sqlx::query("update schedule_runs set schedule_revision = 999, revision = 999 where idempotency_key = $1")
        .bind(&key)
        .execute(pool)
        .await
        .expect("update");
    let shown = read(&router, &format!("/runs/{key}")).await;
    assert_eq!(shown["schedule_revision"], revision, "{shown}");
}
