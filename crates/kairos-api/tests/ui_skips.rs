//! The schedule page through the real router on a real database: a paused-until schedule
//! says "Paused until …, by …, because …" (in the schedule's zone and in UTC, the zone of
//! the pause form's until), and a skipped upcoming fire time is marked with who skipped it
//! and why; a deployer gets Skip on each fire time, Take back on a skipped one, and an
//! until field on the pause form; a reader gets none of them.

use crate::common;

use axum::http::{Method, StatusCode};
use common::{call, deploy_workflow, router, upsert_new, DEPLOYER, READER};
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
    upsert_new(&api, body).await;
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
        line.contains("</time> = <span id=\"paused-until-utc\">2026-03-09 12:00:00 UTC</span>, by"),
        "and in UTC, as the pause form takes it: {line}"
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

async fn page(api: &axum::Router, token: &str) -> String {
    let (status, _, html) = call(
        api,
        Method::GET,
        "/ui/fragments/schedules/hourly",
        Some(token),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    html.as_str().expect("html").to_string()
}

#[tokio::test]
async fn a_deployer_gets_skip_take_back_and_pause_until_and_a_reader_none() {
    let db = TestDb::new().await;
    let api = router(db.pool(), NOW);
    deploy_workflow(&api, "wf", 1).await;
    let body = json!({"schedule_id": "hourly", "workflow_id": "wf", "version": 1,
                      "user_id": "u", "cron_expr": "0 * * * *", "timezone": "UTC"});
    upsert_new(&api, body).await;
    let skip = json!({"run_at": "2026-03-09T12:00:00Z"});
    let (status, _, answer) = call(
        &api,
        Method::POST,
        "/schedules/hourly/skips",
        Some(DEPLOYER),
        Some(skip),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");

    let html = page(&api, DEPLOYER).await;
    let upcoming = between(&html, "id=\"upcoming\"", "</table>");
    assert!(
        upcoming.contains("<th scope=\"col\">Skip</th>"),
        "{upcoming}"
    );
    // Each fire time but the skipped one has a Skip form naming its tick, with a note.
    assert_eq!(upcoming.matches("<form class=\"skip-form\"").count(), 9);
    let first = between(upcoming, "<form class=\"skip-form\"", "</form>");
    assert!(
        first.contains("data-schedule=\"hourly\" data-run-at=\"2026-03-09T11:00:00Z\""),
        "{first}"
    );
    assert!(first.contains("name=\"note\""), "{first}");
    assert!(first.contains(">Skip</button>"), "{first}");
    // The skipped one: marked with who, and Take back instead.
    let row = between(upcoming, "data-run-at=\"2026-03-09T12:00:00Z\">", "</tr>");
    assert!(row.contains("skipped by compiler"), "{row}");
    assert!(!row.contains("skip-form"), "{row}");
    assert!(
        row.contains(
            "class=\"unskip\" type=\"button\" data-schedule=\"hourly\" \
             data-run-at=\"2026-03-09T12:00:00Z\""
        ),
        "{row}"
    );
    assert_eq!(upcoming.matches("class=\"unskip\"").count(), 1);
    // Not paused: the pause form takes an optional until, labelled with its zone.
    let form = between(&html, "id=\"pause-form\"", "</form>");
    assert!(
        form.contains("<label for=\"pause-until\">Until (UTC, optional)</label>"),
        "{form}"
    );
    assert!(form.contains("id=\"pause-until\" name=\"until\""), "{form}");

    // A reader sees the skip, and no control.
    let html = page(&api, READER).await;
    assert!(html.contains("skipped by compiler"), "{html}");
    for control in ["skip-form", "unskip", ">Skip</th>", "pause-until"] {
        assert!(
            !html.contains(control),
            "a reader sees no {control}: {html}"
        );
    }

    // Paused: the form resumes, with no until.
    let pause = json!({"schedule_id": "hourly", "paused": true});
    let (status, _, answer) = call(
        &api,
        Method::POST,
        "/schedules/pause",
        Some(DEPLOYER),
        Some(pause),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{answer}");
    let html = page(&api, DEPLOYER).await;
    let form = between(&html, "id=\"pause-form\"", "</form>");
    assert!(form.contains(">Resume</button>"), "{form}");
    assert!(!form.contains("pause-until"), "{form}");
}
