//! The schedule page through the real router on a real database: a paused-until schedule
//! says "Paused until …, by …, because …", and a skipped upcoming fire time is marked with
//! who skipped it and why.

mod common;

use axum::http::{Method, StatusCode};
use common::{call, deploy_workflow, router, DEPLOYER, READER};
use kairos_testkit::TestDb;
use serde_json::json;

const NOW: &str = "2026-03-09T10:30:00Z";

/// The text between `start` (exclusive) and the next `end` in `html`.
fn between<'a>(html: &'a str, start: &str, end: &str) -> &'a str {
    let from = html
        .find(start)
        .unwrap_or_else(|| panic!("{start:?} in {html}"))
        + start.len();
    let to = html[from..].find(end).expect("end marker") + from;
    &html[from..to]
}

#[tokio::test]
async fn the_page_shows_pause_until_who_why_and_skipped_fire_times() {
    let db = TestDb::new().await;
    let api = router(db.pool(), NOW);
    deploy_workflow(&api, "wf", 1).await;
    let body = json!({"schedule_id": "hourly", "workflow_id": "wf", "version": 1,
                      "user_id": "u", "cron_expr": "0 * * * *", "timezone": "Europe/Paris"});
    let (status, _, answer) = call(
        &api,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    let skip = json!({"run_at": "2026-03-09T13:00:00Z", "note": "db <migration>"});
    let (status, _, answer) = call(
        &api,
        Method::POST,
        "/schedules/hourly/skips",
        Some(DEPLOYER),
        Some(skip),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    let pause = json!({"schedule_id": "hourly", "paused": true, "note": "vendor freeze",
                       "until": "2026-03-09T12:00:00Z"});
    let (status, _, answer) = call(
        &api,
        Method::POST,
        "/schedules/pause",
        Some(DEPLOYER),
        Some(pause),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{answer}");

    let (status, _, html) = call(
        &api,
        Method::GET,
        "/ui/fragments/schedules/hourly",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let html = html.as_str().expect("html").to_string();
    let line = between(&html, "id=\"pause-note-text\">", "</p>");
    assert!(line.starts_with("Paused until "), "{line}");
    assert!(
        line.contains("datetime=\"2026-03-09T12:00:00Z\""),
        "the end of the pause: {line}"
    );
    assert!(
        line.contains("13:00"),
        "shown in the schedule's zone: {line}"
    );
    assert!(
        line.contains(", by <span id=\"paused-by\">compiler</span>"),
        "{line}"
    );
    assert!(
        line.contains(", because <span id=\"pause-because\">vendor freeze</span>"),
        "{line}"
    );

    // The next fire times start when the pause ends; the skipped one is marked, escaped.
    let upcoming = between(&html, "id=\"upcoming\"", "</table>");
    let first = between(upcoming, "<time datetime=\"", "\"");
    assert_eq!(first, "2026-03-09T12:00:00Z");
    let mark = between(
        upcoming,
        "data-skipped=\"2026-03-09T13:00:00Z\">",
        "</span>",
    );
    assert_eq!(mark, "skipped by compiler: db &lt;migration&gt;");
    assert_eq!(
        upcoming.matches("data-skipped=").count(),
        1,
        "only the skipped tick is marked"
    );
}
