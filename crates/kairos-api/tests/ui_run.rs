//! The run page (`/ui/runs/{key}`) through the real router on a real database: the path
//! form and the older query form, links in the path form, the launch message as the
//! launcher would publish it, the chain children, and the styled not-found page for unknown
//! `/ui` paths.

use crate::common;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use common::{call, router, ts, DEPLOYER, READER};
use kairos_core::{RunKey, RunSource, RunStatus};
use kairos_launcher::{LaunchMessage, Source};
use kairos_store::runs::{self, NewRun};
use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use serde_json::{json, Value};
use tower::ServiceExt;

const NOW: &str = "2026-03-05T12:00:00Z";

/// A DAG with text that must be escaped in HTML.
fn dag() -> Value {
    json!({"nodes": [{"id": "extract"}, {"id": "load"}],
           "edges": [{"from": "extract", "to": "load"}],
           "description": "copies <b>rows</b> & \"logs\""})
}

async fn setup(api: &axum::Router) {
    let uri = "/workflows/wa/versions/1";
    let body = json!({"dag": dag()});
    let (status, _, answer) = call(api, Method::PUT, uri, Some(DEPLOYER), Some(body)).await;
    assert!(status.is_success(), "deploy: {status} {answer}");
    let schedule = json!({"schedule_id": "s1", "workflow_id": "wa", "version": 1,
                          "user_id": "u1", "cron_expr": "0 7 * * *", "timezone": "UTC"});
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

async fn insert_run(pool: &kairos_store::PgPool, at: &str, status: RunStatus) -> String {
    let key = RunKey::tick("s1", ts(at)).as_str().to_string();
    let run = NewRun {
        idempotency_key: key.clone(),
        schedule_id: "s1".into(),
        run_at: ts(at),
        fire_at: ts(at),
        status,
        source: RunSource::Schedule,
        overlap: None,
        workflow_id: "wa".into(),
        version: 1,
        user_id: "u1".into(),
    };
    runs::insert(pool, &run, ts(at)).await.expect("insert run");
    key
}

async fn page(api: &axum::Router, uri: &str, token: Option<&str>) -> (StatusCode, String, String) {
    let (status, kind, body) = call(api, Method::GET, uri, token, None).await;
    let text = body.as_str().map(str::to_string).unwrap_or_default();
    (status, kind, text)
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The text between `start` (exclusive) and the next `end` in `html`.
fn between<'a>(html: &'a str, start: &str, end: &str) -> &'a str {
    let from = html
        .find(start)
        .unwrap_or_else(|| panic!("{start} not in {html}"))
        + start.len();
    let to = html[from..].find(end).expect("end") + from;
    &html[from..to]
}

#[tokio::test]
async fn the_path_form_serves_the_run_page_and_the_query_form_redirects_to_it() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    setup(&api).await;
    let key = insert_run(&pool, "2026-03-05T07:00:00Z", RunStatus::Pending).await;

    let (status, kind, shell) = page(&api, &format!("/ui/runs/{key}"), None).await;
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::OK, "text/html; charset=utf-8")
    );
    assert!(
        shell.contains(&format!("data-fragment=\"/ui/fragments/runs/{key}\"")),
        "{shell}"
    );
    assert!(shell.contains("/ui/assets/app.js"), "{shell}");
    assert!(!shell.contains("u1"), "the shell holds no data");

    // The fragment the shell loads: the run's page, behind the reader role.
    let uri = format!("/ui/fragments/runs/{key}");
    let (status, _, fragment) = page(&api, &uri, Some(READER)).await;
    assert_eq!(status, StatusCode::OK, "{fragment}");
    assert!(
        fragment.contains(&format!("<code id=\"run-key\">{key}</code>")),
        "{fragment}"
    );
    let (status, _, _) = page(&api, &uri, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, kind, _) = page(&api, "/ui/fragments/runs/nope", Some(READER)).await;
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::NOT_FOUND, "application/problem+json")
    );

    // The older address answers the same page by a redirect.
    let request = Request::builder()
        .uri(format!("/ui/runs?key={key}"))
        .body(Body::empty())
        .expect("request");
    let response = api.clone().oneshot(request).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::PERMANENT_REDIRECT);
    let location = response.headers()[header::LOCATION]
        .to_str()
        .expect("ascii");
    assert_eq!(location, format!("/ui/runs/{key}"));
    // Without a key it is still the runs list.
    let (status, _, runs) = page(&api, "/ui/runs", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        runs.contains("data-fragment=\"/ui/fragments/runs\""),
        "{runs}"
    );
}

#[tokio::test]
async fn run_links_use_the_path_form_and_children_are_listed() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    setup(&api).await;
    let parent = insert_run(&pool, "2026-03-05T07:00:00Z", RunStatus::Success).await;
    let first = insert_run(&pool, "2026-03-05T07:30:00Z", RunStatus::Pending).await;
    let second = insert_run(&pool, "2026-03-05T07:40:00Z", RunStatus::Failed).await;
    let other = insert_run(&pool, "2026-03-05T07:50:00Z", RunStatus::Pending).await;
    for child in [&first, &second] {
        sqlx::query("update schedule_runs set parent_key = $2 where idempotency_key = $1")
            .bind(child)
            .bind(&parent)
            .execute(&pool)
            .await
            .expect("chain parent");
    }

    let uri = format!("/ui/fragments/runs/{parent}");
    let (status, _, html) = page(&api, &uri, Some(READER)).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    let children = between(&html, "<ul id=\"run-children\">", "</ul>");
    // Both children, oldest tick first, linked in the path form; not the unrelated run.
    let at_first = children
        .find(&format!("href=\"/ui/runs/{first}\""))
        .unwrap_or_else(|| panic!("{first} not linked in {children}"));
    let at_second = children
        .find(&format!("href=\"/ui/runs/{second}\""))
        .unwrap_or_else(|| panic!("{second} not linked in {children}"));
    assert!(at_first < at_second, "{children}");
    assert!(children.contains("FAILED"), "{children}");
    assert!(!children.contains(&other), "{children}");

    // The child's page links back to its parent in the path form.
    let (_, _, child_page) = page(&api, &format!("/ui/fragments/runs/{first}"), Some(READER)).await;
    let parent_cell = between(&child_page, "<dd id=\"run-parent\">", "</dd>");
    assert!(
        parent_cell.contains(&format!("href=\"/ui/runs/{parent}\"")),
        "{parent_cell}"
    );
    assert!(
        child_page.contains("id=\"run-children-none\""),
        "{child_page}"
    );

    // The runs list links every run in the path form, never the query form.
    let (_, _, list) = page(&api, "/ui/fragments/runs", Some(READER)).await;
    assert!(
        list.contains(&format!("href=\"/ui/runs/{parent}\"")),
        "{list}"
    );
    assert!(!list.contains("/ui/runs?key="), "{list}");
}

#[tokio::test]
async fn the_launch_message_shown_is_the_one_the_launcher_publishes() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    setup(&api).await;
    let key = insert_run(&pool, "2026-03-05T07:00:00Z", RunStatus::Enqueued).await;

    // Not published yet: no message to show.
    let uri = format!("/ui/fragments/runs/{key}");
    let (_, _, html) = page(&api, &uri, Some(READER)).await;
    assert!(html.contains("id=\"launch-none\""), "{html}");
    assert!(!html.contains("id=\"launch-message\""), "{html}");

    // Its second attempt, fired with jitter, published.
    sqlx::query(
        "update schedule_runs set attempt = 2, fire_at = $2, published_at = $3 \
         where idempotency_key = $1",
    )
    .bind(&key)
    .bind(ts("2026-03-05T07:00:03.250Z"))
    .bind(ts("2026-03-05T07:00:04Z"))
    .execute(&pool)
    .await
    .expect("published");
    let expected = LaunchMessage {
        idempotency_key: key.clone(),
        schedule_id: "s1".into(),
        workflow_id: "wa".into(),
        version: 1,
        user_id: "u1".into(),
        scheduled_for: LaunchMessage::timestamp(ts("2026-03-05T07:00:00Z")),
        fire_at: LaunchMessage::timestamp(ts("2026-03-05T07:00:03.250Z")),
        source: Source::Schedule,
        attempt: 2,
        region: None,
        dag: Arc::new(dag()),
    };

    let (status, _, html) = page(&api, &uri, Some(READER)).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    let shown = between(
        &html,
        "<pre class=\"launch\" id=\"launch-message\"><code>",
        "</code>",
    );
    // Escaped in the page: the DAG's markup is text, not tags.
    assert!(shown.contains("&lt;b&gt;rows&lt;/b&gt; &amp;"), "{shown}");
    assert!(!shown.contains("<b>"), "{shown}");
    let shown = unescape(shown);
    // Field for field what the launcher would publish (its encoded body, with the subject
    // the router's deployment, 16 status partitions, tells the executor to report on)...
    let status_subject = kairos_launcher::status::status_subject("kairos", &key, 16);
    assert_ne!(status_subject, format!("kairos.status.{key}"));
    let sent: Value =
        serde_json::from_slice(&expected.encode_reporting_on(&status_subject)).expect("json");
    let parsed: Value = serde_json::from_str(&shown).expect("the page shows JSON");
    assert_eq!(parsed, sent);
    for field in [
        "idempotency_key",
        "fire_at",
        "scheduled_for",
        "attempt",
        "dag",
        "source",
        "status_subject",
    ] {
        assert_eq!(parsed[field], sent[field], "{field}");
    }
    // ...in the order sent, pretty-printed.
    assert_eq!(
        shown,
        serde_json::to_string_pretty(&expected.reporting_on(&status_subject)).expect("json")
    );
    let msg_id = between(&html, "<code id=\"launch-msg-id\">", "</code>");
    assert_eq!(msg_id, expected.msg_id());
    assert_eq!(msg_id, format!("{key}:2"));
}

#[tokio::test]
async fn unknown_ui_paths_answer_the_styled_not_found_page() {
    let db = TestDb::new().await;
    let api = router(db.pool(), NOW);
    for path in [
        "/ui/nope",
        "/ui/schedules/s1/extra",
        "/ui/runs/a%20b",
        "/ui/runs?key=a%20b",
    ] {
        let (status, kind, html) = page(&api, path, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(kind, "text/html; charset=utf-8", "{path}");
        assert!(
            html.contains("<h1 id=\"not-found-title\">Not found</h1>"),
            "{path}: {html}"
        );
        assert!(html.contains("/ui/assets/app.css"), "{path}: styled");
        assert!(html.contains("href=\"/ui/runs\""), "{path}: {html}");
    }
    // The path is shown escaped.
    let (_, _, html) = page(&api, "/ui/%3Cscript%3E", None).await;
    assert!(!html.contains("<script>"), "{html}");
    // Outside `/ui`, unknown paths stay problem+json.
    let (status, kind, body) = call(&api, Method::GET, "/nope", None, None).await;
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::NOT_FOUND, "application/problem+json"),
        "{body}"
    );
}

/// After an operator retries a dead letter, the timeline still shows the dead letter (the
/// run row forgot it; the retry's change keeps it) and who retried, with the attempts.
#[tokio::test]
async fn the_timeline_shows_the_dead_letter_a_retry_took_back_and_who_retried() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    setup(&api).await;
    let key = insert_run(&pool, "2026-03-05T07:00:00Z", RunStatus::Failed).await;
    sqlx::query(
        "update schedule_runs set finished_at = '2026-03-05T07:05:00Z', \
         dead_lettered_at = '2026-03-05T07:05:00Z', last_error = 'exit 2' \
         where idempotency_key = $1",
    )
    .bind(&key)
    .execute(&pool)
    .await
    .expect("dead letter");
    let uri = format!("/runs/{key}/retry");
    let (status, _, body) = call(
        &api,
        Method::POST,
        &uri,
        Some(DEPLOYER),
        Some(json!({"request_id": "again-1"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["dead_lettered_at"], Value::Null, "{body}");

    let uri = format!("/ui/fragments/runs/{key}");
    let (status, _, fragment) = page(&api, &uri, Some(READER)).await;
    assert_eq!(status, StatusCode::OK, "{fragment}");
    let timeline = unescape(between(&fragment, "id=\"timeline\"", "</ol>"));
    assert!(timeline.contains("Dead-lettered"), "{timeline}");
    assert!(timeline.contains("attempt 1 was the last"), "{timeline}");
    assert!(timeline.contains("Retried by compiler"), "{timeline}");
    assert!(timeline.contains("attempt 1 → 2"), "{timeline}");
    let dead = timeline.find("Dead-lettered").expect("dead letter");
    let retried = timeline.find("Retried by").expect("retry");
    assert!(dead < retried, "oldest first: {timeline}");
}
