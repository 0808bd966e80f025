//! Execution logs: a status report's `log_url` and `output`, kept per attempt, answered by
//! `GET /runs/{key}` and shown escaped on the run page. Through the real router on a real
//! database.

use crate::common;

use axum::http::{Method, StatusCode};
use common::{call, router, ts, EXECUTOR, READER};
use kairos_core::{RunKey, RunSource, RunStatus, CUT_MARK, MAX_OUTPUT_BYTES};
use kairos_store::runs::{self, NewRun};
use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use serde_json::{json, Value};

const NOW: &str = "2026-03-05T12:00:00Z";
const LOGS: &str = "https://logs.example.com/runs/r-1?attempt=1";
const MARKUP: &str = "step 1 ok\n<script>alert(1)</script> & \"done\"\n";

/// A schedule with two attempts and its published run of 07:00, `ENQUEUED`.
async fn published_run(api: &axum::Router, pool: &kairos_store::PgPool) -> String {
    common::deploy_workflow(api, "wa", 1).await;
    let schedule = json!({"schedule_id": "s1", "workflow_id": "wa", "version": 1,
                          "user_id": "u1", "cron_expr": "0 7 * * *", "timezone": "UTC",
                          "max_attempts": 2, "retry_intervals_s": [60]});
    common::upsert_new(api, schedule).await;
    let at = ts("2026-03-05T07:00:00Z");
    let key = RunKey::tick("s1", at).as_str().to_string();
    let run = NewRun {
        idempotency_key: key.clone(),
        schedule_id: "s1".into(),
        run_at: at,
        fire_at: at,
        status: RunStatus::Enqueued,
        source: RunSource::Schedule,
        overlap: None,
        workflow_id: "wa".into(),
        version: 1,
        user_id: "u1".into(),
    };
    runs::insert(pool, &run, at).await.expect("insert run");
    sqlx::query("update schedule_runs set published_at = $2 where idempotency_key = $1")
        .bind(&key)
        .bind(at)
        .execute(pool)
        .await
        .expect("published");
    key
}

async fn report(api: &axum::Router, key: &str, body: Value) -> (StatusCode, Value) {
    let uri = format!("/runs/{key}/status");
    let (status, _, answer) = call(api, Method::POST, &uri, Some(EXECUTOR), Some(body)).await;
    (status, answer)
}

async fn logs(api: &axum::Router, key: &str) -> Value {
    let (status, _, run) = call(
        api,
        Method::GET,
        &format!("/runs/{key}"),
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    run["logs"].clone()
}

#[tokio::test]
async fn reports_keep_each_attempts_link_and_output_tail() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    let key = published_run(&api, &pool).await;
    assert_eq!(logs(&api, &key).await, json!([]));

    let started = json!({"status": "STARTED", "executor_id": "exec-a", "log_url": LOGS});
    let (status, answer) = report(&api, &key, started).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let kept = logs(&api, &key).await;
    assert_eq!(kept[0]["attempt"], 1);
    assert_eq!(kept[0]["log_url"], LOGS);
    assert_eq!(kept[0]["output"], Value::Null);

    // A heartbeat's output is kept beside the link the start gave.
    let beat = json!({"status": "HEARTBEAT", "executor_id": "exec-a", "output": MARKUP});
    let (status, answer) = report(&api, &key, beat).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let kept = logs(&api, &key).await;
    assert_eq!(kept.as_array().map(Vec::len), Some(1), "{kept}");
    assert_eq!(kept[0]["log_url"], LOGS);
    assert_eq!(kept[0]["output"], MARKUP);

    // Refused reports change nothing: a link of another scheme (named field and rule), and
    // another executor's report about the run exec-a owns.
    for (url, rule) in [
        ("javascript:alert(1)", "must be an http:// or https:// link"),
        ("data:text/html,x", "must be an http:// or https:// link"),
        ("https://", "must name a host after the scheme"),
    ] {
        let body = json!({"status": "HEARTBEAT", "executor_id": "exec-a", "log_url": url});
        let (status, answer) = report(&api, &key, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {answer}");
        assert_eq!(answer["errors"][0]["field"], "log_url", "{answer}");
        assert_eq!(answer["errors"][0]["rule"], rule, "{answer}");
    }
    let other = json!({"status": "HEARTBEAT", "executor_id": "exec-b", "output": "not mine"});
    let (status, answer) = report(&api, &key, other).await;
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    assert_eq!(logs(&api, &key).await, kept, "nothing changed");

    // The failure ends attempt 1 with its last output; attempt 2 is due.
    let failed = json!({"status": "FAILED", "executor_id": "exec-a", "error": "exit 2",
                        "output": "the end\n"});
    let (status, answer) = report(&api, &key, failed).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["status"], "RETRYING", "{answer}");
    assert_eq!(answer["attempt"], 2, "{answer}");
    // A late report about attempt 1 changes nothing, its logs included.
    let late = json!({"status": "FAILED", "attempt": 1, "executor_id": "exec-a",
                      "output": "late"});
    let (status, answer) = report(&api, &key, late).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let kept = logs(&api, &key).await;
    assert_eq!(kept.as_array().map(Vec::len), Some(1), "{kept}");
    assert_eq!(kept[0]["attempt"], 1);
    assert_eq!(kept[0]["log_url"], LOGS);
    assert_eq!(kept[0]["output"], "the end\n");
}

#[tokio::test]
async fn a_long_output_keeps_its_last_16_kib() {
    let long = format!("{}{}", "old line\n".repeat(4000), "last line\n");
    let report =
        kairos_worker::intake::parse_report("k-1", &json!({"status": "HEARTBEAT", "output": long}))
            .expect("a valid report");
    let kept = report.output.expect("output");
    assert!(kept.starts_with(CUT_MARK), "marked as cut");
    assert_eq!(kept.len(), CUT_MARK.len() + MAX_OUTPUT_BYTES);
    assert!(kept.ends_with("old line\nlast line\n"));
}

#[tokio::test]
async fn the_run_page_shows_logs_escaped_and_links_only_http() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    let key = published_run(&api, &pool).await;
    let uri = format!("/ui/fragments/runs/{key}");
    let (status, _, page) = call(&api, Method::GET, &uri, Some(READER), None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let page = page.as_str().unwrap_or_default().to_string();
    assert!(page.contains("id=\"run-logs-none\""), "{page}");

    let body = json!({"status": "STARTED", "executor_id": "exec-a", "log_url": LOGS,
                      "output": MARKUP});
    let (status, answer) = report(&api, &key, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    // A row no report could write (the intake refuses the scheme): the page must not link it.
    sqlx::query(
        "insert into run_logs (idempotency_key, attempt, log_url, output, updated_at) \
         values ($1, 2, 'javascript:alert(2)', null, now())",
    )
    .bind(&key)
    .execute(&pool)
    .await
    .expect("a bad row");

    let (status, _, page) = call(&api, Method::GET, &uri, Some(READER), None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let page = page.as_str().unwrap_or_default().to_string();
    assert!(!page.contains("run-logs-none"), "{page}");
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;done&quot;"),
        "the output is escaped: {page}"
    );
    assert!(!page.contains("<script>alert(1)"), "{page}");
    assert!(
        page.contains(&format!("href=\"{}\"", LOGS.replace('&', "&amp;"))),
        "{page}"
    );
    assert!(!page.contains("href=\"javascript:"), "{page}");
    assert!(page.contains("<code>javascript:alert(2)</code>"), "{page}");
    assert!(page.contains("data-attempt=\"2\""), "{page}");
}
