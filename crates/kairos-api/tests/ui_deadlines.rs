//! Deadlines on the operator page, through the real router on a real database: the run page
//! says a run's deadline and, once the sweep's statement marked it late, when, by how much
//! and why (also in its timeline); the schedule page shows its `deadline_s`, the deadline
//! of each next fire time, and marks its late runs in the run table.

use crate::common;

use axum::http::{Method, StatusCode};
use common::{call, router, ts, DEPLOYER, READER};
use kairos_core::{RunKey, RunSource, RunStatus};
use kairos_store::runs::{self, NewRun};
use kairos_store::{deadlines, PgPool};
use kairos_testkit::{sqlx, TestDb};
use serde_json::json;

const NOW: &str = "2026-03-05T12:00:00Z";

async fn setup(api: &axum::Router) {
    common::deploy_workflow(api, "wa", 1).await;
    let schedule = json!({"schedule_id": "s1", "workflow_id": "wa", "version": 1,
        "user_id": "u1", "cron_expr": "0 7 * * *", "timezone": "UTC", "deadline_s": 600});
    let (status, _, answer) = call(
        api,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        Some(schedule),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
}

/// A tick of `s1` at `at` (deadline ten minutes later) in `status`, ended at `finished`.
async fn run(pool: &PgPool, at: &str, status: &str, finished: Option<&str>) -> String {
    let key = RunKey::tick("s1", ts(at)).as_str().to_string();
    let new = NewRun {
        idempotency_key: key.clone(),
        schedule_id: "s1".into(),
        run_at: ts(at),
        fire_at: ts(at),
        status: RunStatus::Pending,
        source: RunSource::Schedule,
        overlap: None,
        workflow_id: "wa".into(),
        version: 1,
        user_id: "u1".into(),
    };
    runs::insert(pool, &new, ts(at)).await.expect("insert run");
    sqlx::query(
        "update schedule_runs set deadline_at = run_at + interval '10 minutes', \
           deadline_open = true, status = $2, published_at = run_at, started_at = run_at, \
           finished_at = $3::timestamptz where idempotency_key = $1",
    )
    .bind(&key)
    .bind(status)
    .bind(finished)
    .execute(pool)
    .await
    .expect("set run");
    key
}

async fn page(api: &axum::Router, uri: &str) -> String {
    let (status, _, body) = call(api, Method::GET, uri, Some(READER), None).await;
    assert_eq!(status, StatusCode::OK, "{uri}: {body}");
    body.as_str().expect("html").to_string()
}

/// The text of the element with `id` (up to its closing `</dd>`).
fn field<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("#{id} not in {html}"));
    let end = html[start..].find("</dd>").expect("end of the field") + start;
    &html[start..end]
}

#[tokio::test]
async fn the_pages_say_when_a_run_is_late_and_by_how_much() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    setup(&api).await;
    let running = run(&pool, "2026-03-05T07:00:00Z", "STARTED", None).await;
    let in_time = run(
        &pool,
        "2026-03-04T07:00:00Z",
        "SUCCESS",
        Some("2026-03-04T07:05:00Z"),
    )
    .await;
    let after = run(
        &pool,
        "2026-03-03T07:00:00Z",
        "SUCCESS",
        Some("2026-03-03T07:25:00Z"),
    )
    .await;
    let mut conn = pool.acquire().await.expect("connection");
    let judged = deadlines::judge(&mut conn, ts("2026-03-05T11:00:00Z"), 100)
        .await
        .expect("judge");
    assert_eq!(judged.late.len(), 2);

    // Unfinished past its deadline: overdue by the time since it (now is 12:00).
    let html = page(&api, &format!("/ui/fragments/runs/{running}")).await;
    let deadline = field(&html, "run-deadline");
    assert!(deadline.contains("2026-03-05 07:10:00 UTC"), "{deadline}");
    let late = field(&html, "run-late");
    assert!(late.contains("overdue by 4h 50m, still STARTED"), "{late}");
    assert!(
        late.contains("marked <time datetime=\"2026-03-05T11:00:00Z\">"),
        "{late}"
    );
    assert!(
        late.contains("STARTED and not final at its deadline 2026-03-05T07:10:00Z"),
        "{late}"
    );
    assert!(
        html.contains("<strong>Marked late</strong>"),
        "the timeline: {html}"
    );
    assert!(
        html.contains("status-started\">STARTED<"),
        "late is not a status: {html}"
    );

    // Ended after its deadline: by how much.
    let html = page(&api, &format!("/ui/fragments/runs/{after}")).await;
    let late = field(&html, "run-late");
    assert!(
        late.contains("ended SUCCESS 15m 0s after its deadline"),
        "{late}"
    );

    // A success in time is not late.
    let html = page(&api, &format!("/ui/fragments/runs/{in_time}")).await;
    assert!(field(&html, "run-late").ends_with(">no"), "{html}");
    assert!(!html.contains("Marked late"), "{html}");

    // The schedule page: its deadline, each next fire time's, and its late runs marked.
    let html = page(&api, "/ui/fragments/schedules/s1").await;
    assert!(
        html.contains("<dt>Deadline (s after the tick)</dt><dd>600</dd>"),
        "{html}"
    );
    assert!(html.contains("Must be final by (UTC)"), "{html}");
    assert!(
        html.contains(
            "2026-03-06 07:10:00 UTC <span class=\"mark deadline\">deadline_s 600</span>"
        ),
        "the next fire time (2026-03-06 07:00) and its deadline: {html}"
    );
    let marks = html.matches("<small class=\"late\"").count();
    assert_eq!(marks, 2, "the two late runs in the run table: {html}");
    assert!(
        html.contains("late (overdue by 4h 50m, still STARTED)"),
        "{html}"
    );
    assert!(
        html.contains("late (ended SUCCESS 15m 0s after its deadline)"),
        "{html}"
    );
}
