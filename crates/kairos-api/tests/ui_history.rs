//! The History tab of the schedule page (`/ui/fragments/schedules/{id}`) through the real
//! router on a real database: a tab (WAI-ARIA tablist, tab, tabpanel) beside the fire times
//! and runs, closed until chosen; each change with its time, actor, request id, kind, fields
//! old → new and note, newest first, with the note escaped.

use crate::common;

use axum::http::{Method, StatusCode};
use common::{call, deploy_workflow, router, seed_body, DEPLOYER, READER};
use kairos_testkit::TestDb;
use serde_json::json;

const NOW: &str = "2026-03-09T12:00:00Z";

#[tokio::test]
async fn the_schedule_page_shows_its_history_of_changes() {
    let db = TestDb::new().await;
    let api = router(db.pool(), NOW);
    deploy_workflow(&api, "report", 3).await;
    let uri = "/ui/fragments/schedules/nightly-report";

    let write = |body: serde_json::Value, path: &'static str| {
        let api = api.clone();
        async move {
            let (status, _, answer) =
                call(&api, Method::POST, path, Some(DEPLOYER), Some(body)).await;
            assert!(status.is_success(), "{path}: {status} {answer}");
        }
    };
    write(seed_body(), "/schedules/upsert").await;
    // Before any other change: only the creation.
    let (status, _, page) = call(&api, Method::GET, uri, Some(READER), None).await;
    assert_eq!(status, StatusCode::OK);
    let html = page.as_str().expect("html");
    assert!(html.contains(r#"id="history""#), "{html}");
    assert_eq!(html.matches("data-change-id=").count(), 1, "{html}");
    // History is a tab: the first tab (fire times and runs) is open, History closed.
    assert!(
        html.contains(r#"<div class="tablist" role="tablist" aria-label="Schedule views">"#),
        "{html}"
    );
    assert!(
        html.contains(r##"<a role="tab" id="tab-overview" href="#overview" aria-controls="overview" aria-selected="true" tabindex="0">"##),
        "{html}"
    );
    assert!(
        html.contains(r##"<a role="tab" id="tab-history" href="#history" aria-controls="history" aria-selected="false" tabindex="-1">History</a>"##),
        "{html}"
    );
    assert!(
        html.contains(r#"<section class="tabpanel" role="tabpanel" id="overview" aria-labelledby="tab-overview">"#),
        "{html}"
    );
    let panel = html
        .find(r#"<section class="tabpanel" role="tabpanel" id="history" aria-labelledby="tab-history" hidden>"#)
        .unwrap_or_else(|| panic!("a hidden History panel: {html}"));
    let runs = html.find(r#"id="runs-title""#).expect("runs");
    let table = html.find(r#"id="history-table""#).expect("history table");
    assert!(
        runs < panel && panel < table,
        "the changes are in the History panel"
    );

    let mut changed = seed_body();
    changed["cron_expr"] = json!("0 8 * * *");
    write(changed, "/schedules/upsert").await;
    let pause =
        json!({"schedule_id": "nightly-report", "paused": true, "note": "db <migration> & backup"});
    write(pause, "/schedules/pause").await;

    let (status, _, page) = call(&api, Method::GET, uri, Some(READER), None).await;
    assert_eq!(status, StatusCode::OK);
    let html = page.as_str().expect("html");
    let table = &html[html.find(r#"id="history-table""#).expect("history table")..];
    assert_eq!(table.matches("data-change-id=").count(), 3, "{table}");
    // Newest first: pause, update, create.
    let at = |needle: &str| {
        table
            .find(needle)
            .unwrap_or_else(|| panic!("{needle} in {table}"))
    };
    assert!(at("kind-pause") < at("kind-update") && at("kind-update") < at("kind-create"));
    // Who and when.
    assert!(table.contains("compiler"), "{table}");
    assert!(
        table.contains(r#"datetime="2026-03-09T12:00:00Z""#),
        "{table}"
    );
    assert!(table.contains("2026-03-09 12:00:00 UTC"), "{table}");
    // The update's field, old → new.
    assert!(
        table.contains(r#"<code>cron_expr</code>: <span class="old">0 7 * * *</span> → <span class="new">0 8 * * *</span>"#),
        "{table}"
    );
    // The pause: its field and its note, escaped.
    assert!(
        table.contains(
            r#"<code>paused</code>: <span class="old">false</span> → <span class="new">true</span>"#
        ),
        "{table}"
    );
    assert!(
        table.contains("db &lt;migration&gt; &amp; backup"),
        "{table}"
    );
    assert!(!table.contains("<migration>"), "{table}");
}
