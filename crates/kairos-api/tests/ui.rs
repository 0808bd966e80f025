//! The operator page's routes through the real router on a real database: open shells with
//! no data, fragments behind the reader role with buttons only for a deployer, the schedule
//! page's DST and jitter marks and "why", the runs views, the backfill plan, and bad
//! parameters as problem+json naming the parameter.

use crate::common;

use axum::http::{Method, StatusCode};
use common::{call, deploy_workflow, router, ts, upsert_new, DEPLOYER, EXECUTOR, READER};
use kairos_core::{RunKey, RunSource, RunStatus};
use kairos_store::runs::{self, NewRun};
use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use serde_json::{json, Value};

/// Three days before the 2026 spring-forward in New York (2026-03-08, 02:00 → 03:00).
const NOW: &str = "2026-03-05T12:00:00Z";

async fn upsert(api: &axum::Router, body: Value) {
    let workflow = body["workflow_id"].as_str().expect("workflow_id");
    deploy_workflow(api, workflow, body["version"].as_i64().expect("version")).await;
    upsert_new(api, body).await;
}

fn html(answer: &Value) -> &str {
    answer.as_str().expect("an HTML answer")
}

/// The text of `page` without its tags: what it says, however the words are wrapped.
fn text(page: &str) -> String {
    let mut out = String::with_capacity(page.len());
    let mut in_tag = false;
    for c in page.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

async fn insert_run(pool: &kairos_store::PgPool, id: &str, at: &str, status: RunStatus) -> String {
    let key = RunKey::tick(id, ts(at)).as_str().to_string();
    let run = NewRun {
        idempotency_key: key.clone(),
        schedule_id: id.into(),
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

#[tokio::test]
async fn shells_are_open_and_hold_no_data() {
    let db = TestDb::new().await;
    let api = router(db.pool(), NOW);
    upsert(
        &api,
        json!({"schedule_id": "secret-schedule", "workflow_id": "wa", "version": 1,
               "user_id": "u1", "cron_expr": "0 7 * * *", "timezone": "UTC"}),
    )
    .await;
    for path in ["/ui", "/ui/schedules/secret-schedule", "/ui/runs"] {
        let (status, kind, body) = call(&api, Method::GET, path, None, None).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(kind, "text/html; charset=utf-8", "{path}");
        let page = html(&body);
        assert!(page.contains("data-auth=\"tokens\""), "{path}: {page}");
        assert!(page.contains("/ui/assets/app.js"), "{path}");
        assert!(!page.contains("u1"), "{path} must hold no data");
    }
    // Not a schedule id: refused, never echoed into the page's script.
    let (status, kind, body) = call(&api, Method::GET, "/ui/schedules/a%20b", None, None).await;
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::BAD_REQUEST, "application/problem+json")
    );
    assert_eq!(body["errors"][0]["field"], json!("schedule_id"));
    let (status, kind, body) = call(&api, Method::GET, "/ui/assets/app.js", None, None).await;
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::OK, "text/javascript; charset=utf-8")
    );
    assert!(html(&body).contains("sessionStorage"));
    let (status, kind, _) = call(&api, Method::GET, "/ui/assets/app.css", None, None).await;
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::OK, "text/css; charset=utf-8")
    );
}

#[tokio::test]
async fn fragments_need_a_reader_and_show_buttons_only_to_a_deployer() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    upsert(
        &api,
        json!({"schedule_id": "s1", "workflow_id": "wa", "version": 1, "user_id": "u1",
               "cron_expr": "0 7 * * *", "timezone": "America/New_York"}),
    )
    .await;
    insert_run(&pool, "s1", "2026-03-05T11:00:00Z", RunStatus::Enqueued).await;
    for path in [
        "/ui/fragments/schedules",
        "/ui/fragments/schedules/s1",
        "/ui/fragments/runs",
    ] {
        let (status, kind, _) = call(&api, Method::GET, path, None, None).await;
        assert_eq!(
            (status, kind.as_str()),
            (StatusCode::UNAUTHORIZED, "application/problem+json"),
            "{path}"
        );
        let (status, _, body) = call(&api, Method::GET, path, Some(READER), None).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        let page = html(&body);
        assert!(page.contains("data-role=\"reader\""), "{path}");
        for control in [
            "pause-button",
            "trigger-button",
            "backfill-form",
            "class=\"cancel\"",
        ] {
            assert!(
                !page.contains(control),
                "{path}: a reader sees no {control}"
            );
        }
    }
    let (_, _, body) = call(
        &api,
        Method::GET,
        "/ui/fragments/schedules/s1",
        Some(DEPLOYER),
        None,
    )
    .await;
    let page = html(&body);
    for control in [
        "pause-button",
        "trigger-button",
        "backfill-form",
        "class=\"cancel\"",
    ] {
        assert!(page.contains(control), "a deployer sees {control}");
    }
    let (_, _, body) = call(
        &api,
        Method::GET,
        "/ui/fragments/schedules",
        Some(READER),
        None,
    )
    .await;
    let page = html(&body);
    // The next fire time in the schedule's zone and in UTC.
    assert!(
        text(page).contains("2026-03-05 07:00:00 EST (America/New_York)"),
        "{page}"
    );
    assert!(page.contains("2026-03-05 12:00:00 UTC"), "{page}");
}

#[tokio::test]
async fn schedule_page_marks_dst_and_jitter_and_says_why() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    upsert(
        &api,
        json!({"schedule_id": "early", "workflow_id": "wa", "version": 1, "user_id": "u1",
               "cron_expr": "30 2 * * *", "timezone": "America/New_York", "jitter_ms": 60000}),
    )
    .await;
    // A planned tick, then a pause cancels it: the why of the page.
    insert_run(&pool, "early", "2026-03-06T07:30:00Z", RunStatus::Pending).await;
    let (status, _, _) = call(
        &api,
        Method::POST,
        "/schedules/pause",
        Some(DEPLOYER),
        Some(json!({"schedule_id": "early", "paused": true})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _, body) = call(
        &api,
        Method::GET,
        "/ui/fragments/schedules/early",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let page = html(&body);
    assert!(
        page.contains("at 02:30, every day, wall time in America/New_York"),
        "{page}"
    );
    assert!(
        page.contains("Why the last tick did not launch: </strong>CANCELLED: paused"),
        "{page}"
    );
    // Ten next fire times, each row naming its tick.
    assert_eq!(page.matches("<tr data-run-at=\"").count(), 10, "{page}");
    // 2026-03-08 02:30 does not exist in New York: shifted to the jump.
    assert!(page.contains("DST gap: 02:30 did not exist"), "{page}");
    assert!(
        text(page).contains("2026-03-08 03:00:00 EDT (America/New_York)"),
        "{page}"
    );
    assert_eq!(page.matches("class=\"mark jitter\"").count(), 10, "{page}");
    assert!(page.contains("±60000"), "{page}");
}

#[tokio::test]
async fn runs_views_and_backfill_plan() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    upsert(
        &api,
        json!({"schedule_id": "s1", "workflow_id": "wa", "version": 1, "user_id": "u1",
               "cron_expr": "0 7 * * *", "timezone": "UTC"}),
    )
    .await;
    let flying = insert_run(&pool, "s1", "2026-03-05T10:00:00Z", RunStatus::Enqueued).await;
    let done = insert_run(&pool, "s1", "2026-03-04T07:00:00Z", RunStatus::Skipped).await;
    let dead = insert_run(&pool, "s1", "2026-03-03T07:00:00Z", RunStatus::Failed).await;
    sqlx::query("update schedule_runs set dead_lettered_at = $2 where idempotency_key = $1")
        .bind(&dead)
        .bind(ts("2026-03-03T08:00:00Z"))
        .execute(&pool)
        .await
        .expect("dead-letter");

    // The listing's one-statement statistics tell what the schedule's own do.
    let ids = ["s1".to_string(), "unknown".to_string()];
    let many = kairos_store::stats::for_schedules(&pool, &ids, 1000)
        .await
        .expect("stats of a page");
    for (id, got) in ids.iter().zip(&many) {
        let one = kairos_store::stats::for_schedule(&pool, id, 1000)
            .await
            .expect("stats of one");
        assert_eq!(got, &one, "{id}");
    }
    assert_eq!((many[0].runs_examined, many[0].skipped_ticks), (3, 1));

    let get = |uri: &'static str| {
        let api = api.clone();
        async move {
            let (status, _, body) = call(&api, Method::GET, uri, Some(DEPLOYER), None).await;
            assert_eq!(status, StatusCode::OK, "{uri}: {body}");
            body.as_str().expect("html").to_string()
        }
    };
    let recent = get("/ui/fragments/runs").await;
    for key in [&flying, &done, &dead] {
        assert!(recent.contains(key.as_str()), "{recent}");
    }
    let skipped = get("/ui/fragments/runs?status=SKIPPED&schedule_id=s1&workflow_id=wa").await;
    assert!(skipped.contains(done.as_str()) && !skipped.contains(flying.as_str()));
    let in_flight = get("/ui/fragments/runs?view=in_flight").await;
    assert!(in_flight.contains(flying.as_str()) && !in_flight.contains(done.as_str()));
    // Enqueued at 10:00 (no publish time recorded): two hours at the pinned now.
    assert!(in_flight.contains("in flight for 2h 0m"), "{in_flight}");
    let dead_letters = get("/ui/fragments/runs?view=dead_letters").await;
    assert!(dead_letters.contains(dead.as_str()) && !dead_letters.contains(done.as_str()));
    assert!(dead_letters.contains("class=\"retry\""), "{dead_letters}");

    let plan = get(
        "/ui/fragments/schedules/s1/backfill?from=2026-03-01T00:00:00Z&to=2026-03-04T00:00:00Z",
    )
    .await;
    assert!(plan.contains("data-total=\"3\""), "{plan}");
    assert!(plan.contains("backfill-confirm"), "{plan}");

    for (uri, field) in [
        ("/ui/fragments/runs?status=NOPE", "status"),
        ("/ui/fragments/runs?view=all", "view"),
        ("/ui/fragments/schedules?bogus=1", "bogus"),
        ("/ui/fragments/schedules?paused=maybe", "paused"),
        (
            "/ui/fragments/schedules/s1/backfill?from=2026-03-01T00:00:00Z",
            "to",
        ),
    ] {
        let (status, kind, body) = call(&api, Method::GET, uri, Some(READER), None).await;
        assert_eq!(
            (status, kind.as_str()),
            (StatusCode::BAD_REQUEST, "application/problem+json"),
            "{uri}"
        );
        assert_eq!(body["errors"][0]["field"], json!(field), "{uri}: {body}");
    }
    let (status, _, _) = call(
        &api,
        Method::GET,
        "/ui/fragments/schedules/nope",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// The fragment `uri` as the caller `token` gets it; it must be a 200.
async fn page(api: &axum::Router, uri: &str, token: &str) -> String {
    let (status, _, body) = call(api, Method::GET, uri, Some(token), None).await;
    assert_eq!(status, StatusCode::OK, "{uri}: {body}");
    body.as_str().expect("html").to_string()
}

#[tokio::test]
async fn run_page_shows_attempts_timeline_parent_and_actions() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    upsert(
        &api,
        json!({"schedule_id": "s1", "workflow_id": "wa", "version": 1, "user_id": "u1",
               "cron_expr": "0 7 * * *", "timezone": "UTC"}),
    )
    .await;
    let key = insert_run(&pool, "s1", "2026-03-05T07:00:00Z", RunStatus::Enqueued).await;
    sqlx::query("update schedule_runs set published_at = $2 where idempotency_key = $1")
        .bind(&key)
        .bind(ts("2026-03-05T07:00:01Z"))
        .execute(&pool)
        .await
        .expect("published");
    let failed = json!({"status": "FAILED", "executor_id": "exec-7", "error": "exit 3: disk full"});
    let uri = format!("/runs/{key}/status");
    let (status, _, body) = call(&api, Method::POST, &uri, Some(EXECUTOR), Some(failed)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // A chained run fired by it.
    let child = insert_run(&pool, "s1", "2026-03-05T07:30:00Z", RunStatus::Pending).await;
    sqlx::query("update schedule_runs set parent_key = $2 where idempotency_key = $1")
        .bind(&child)
        .bind(&key)
        .execute(&pool)
        .await
        .expect("chain parent");

    let run_page = page(&api, &format!("/ui/fragments/runs?key={key}"), DEPLOYER).await;
    assert!(
        run_page.contains(&format!("<code id=\"run-key\">{key}</code>")),
        "{run_page}"
    );
    assert!(run_page.contains("exit 3: disk full"), "{run_page}");
    assert!(run_page.contains("exec-7"), "{run_page}");
    assert!(run_page.contains("Attempt 1 published"), "{run_page}");
    assert!(run_page.contains("Attempt 1 ended FAILED"), "{run_page}");
    assert!(run_page.contains("Dead-lettered"), "{run_page}");
    assert!(
        run_page.contains("class=\"retry\""),
        "a failed run can be retried"
    );
    assert!(
        !run_page.contains("class=\"cancel\""),
        "a finished run cannot be cancelled"
    );
    // The timeline is in time order: published, then ended.
    let published = run_page.find("Attempt 1 published").expect("published");
    let ended = run_page.find("Attempt 1 ended").expect("ended");
    assert!(published < ended, "{run_page}");

    let child_page = page(&api, &format!("/ui/fragments/runs?key={child}"), READER).await;
    assert!(
        child_page.contains(&format!("href=\"/ui/runs/{key}\"")),
        "the parent links its page: {child_page}"
    );
    assert!(!child_page.contains("<button"), "a reader gets no buttons");
    let deployer_child = page(&api, &format!("/ui/fragments/runs?key={child}"), DEPLOYER).await;
    assert!(
        deployer_child.contains("class=\"cancel\""),
        "a pending run can be cancelled"
    );
    assert!(!deployer_child.contains("class=\"retry\""));

    // A retry: attempt 1 stays in the history, attempt 2 is the current one.
    let (status, _, body) = call(
        &api,
        Method::POST,
        &format!("/runs/{key}/retry"),
        Some(DEPLOYER),
        Some(json!({"request_id": "again"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let retried = page(&api, &format!("/ui/fragments/runs?key={key}"), READER).await;
    assert!(retried.contains("data-attempt=\"1\""), "{retried}");
    assert!(retried.contains("data-attempt=\"2\""), "{retried}");

    // Run keys in the tables link the run's page.
    let list = page(&api, "/ui/fragments/runs", READER).await;
    assert!(list.contains(&format!("href=\"/ui/runs/{key}\"")), "{list}");

    // An unknown run is a 404; a key with other filters is refused by name.
    let (status, kind, _) = call(
        &api,
        Method::GET,
        &format!("/ui/fragments/runs?key={}", "0".repeat(64)),
        Some(READER),
        None,
    )
    .await;
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::NOT_FOUND, "application/problem+json")
    );
    let (status, _, body) = call(
        &api,
        Method::GET,
        &format!("/ui/fragments/runs?key={key}&view=upcoming"),
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["errors"][0]["field"], json!("view"), "{body}");
}

#[tokio::test]
async fn fired_runs_and_upcoming_ticks_are_apart() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    upsert(
        &api,
        json!({"schedule_id": "s1", "workflow_id": "wa", "version": 1, "user_id": "u1",
               "cron_expr": "* * * * * *", "timezone": "UTC"}),
    )
    .await;
    let fired = insert_run(&pool, "s1", "2026-03-05T11:59:00Z", RunStatus::Success).await;
    let due = insert_run(&pool, "s1", "2026-03-05T12:00:00Z", RunStatus::Pending).await;
    let soon = insert_run(&pool, "s1", "2026-03-05T12:00:20Z", RunStatus::Pending).await;
    let later = insert_run(&pool, "s1", "2026-03-05T12:00:30Z", RunStatus::Pending).await;

    let recent = page(&api, "/ui/fragments/runs", READER).await;
    assert!(recent.contains(&fired) && recent.contains(&due), "{recent}");
    assert!(
        !recent.contains(&soon) && !recent.contains(&later),
        "the default view shows what has fired, not future ticks: {recent}"
    );
    let upcoming = page(&api, "/ui/fragments/runs?view=upcoming", READER).await;
    assert!(
        upcoming.contains(&soon) && upcoming.contains(&later),
        "{upcoming}"
    );
    assert!(
        !upcoming.contains(&fired) && !upcoming.contains(&due),
        "{upcoming}"
    );
    let (first, second) = (
        upcoming.find(&soon).expect("soon"),
        upcoming.find(&later).expect("later"),
    );
    assert!(first < second, "upcoming is soonest first");
    // The schedule page keeps them apart too: fired runs in its table, ticks ahead below.
    let schedule = page(&api, "/ui/fragments/schedules/s1", READER).await;
    let planned = schedule.find("id=\"planned-runs\"").expect("planned ahead");
    let table = schedule.find("id=\"runs\"").expect("runs table");
    for key in [&fired, &due] {
        let at = schedule.find(key.as_str()).expect("fired run shown");
        assert!(
            table < at && at < planned,
            "{key} is in the runs table: {schedule}"
        );
    }
    for key in [&soon, &later] {
        let at = schedule.find(key.as_str()).expect("tick ahead shown");
        assert!(at > planned, "{key} is under planned ahead: {schedule}");
    }
    // The last day's outcomes chart counts what ended, not what is planned.
    assert!(
        schedule.contains("data-success=\"1\" data-failed=\"0\" data-skipped=\"0\""),
        "{schedule}"
    );
    assert_eq!(
        schedule.matches("<rect class=\"bar-success\"").count(),
        1,
        "{schedule}"
    );
    assert!(
        upcoming.contains("aria-current=\"page\" data-view")
            || upcoming.contains("data-view=\"upcoming\" aria-current=\"page\""),
        "{upcoming}"
    );
}

#[tokio::test]
async fn times_are_said_once_and_deployers_get_delete_and_retry() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    upsert(
        &api,
        json!({"schedule_id": "s1", "workflow_id": "wa", "version": 1, "user_id": "u1",
               "cron_expr": "0 7 * * *", "timezone": "UTC"}),
    )
    .await;
    // A launch that failed before it was published: FAILED, never dead-lettered.
    let failed = insert_run(&pool, "s1", "2026-03-05T07:00:00Z", RunStatus::Failed).await;
    for uri in [
        "/ui/fragments/schedules",
        "/ui/fragments/schedules/s1",
        "/ui/fragments/runs",
    ] {
        let html = page(&api, uri, DEPLOYER).await;
        assert!(!html.contains("UTC (UTC)"), "{uri}: {html}");
    }
    let list = page(&api, "/ui/fragments/schedules", READER).await;
    assert_eq!(list.matches("2026-03-06 07:00:00 UTC").count(), 1, "{list}");

    let schedule = page(&api, "/ui/fragments/schedules/s1", DEPLOYER).await;
    assert!(schedule.contains("id=\"delete-button\""), "{schedule}");
    assert!(schedule.contains("id=\"delete-form\""), "{schedule}");
    let retry = format!("class=\"retry\" type=\"button\" data-key=\"{failed}\"");
    assert!(schedule.contains(&retry), "{schedule}");
    let runs = page(&api, "/ui/fragments/runs", DEPLOYER).await;
    assert!(runs.contains(&retry), "{runs}");
    let reader = page(&api, "/ui/fragments/schedules/s1", READER).await;
    assert!(!reader.contains("delete-button") && !reader.contains("class=\"retry\""));
}

#[tokio::test]
async fn schedule_page_says_how_many_runs_may_be_in_flight() {
    let db = TestDb::new().await;
    let api = router(db.pool(), NOW);
    for (id, overlap, limit) in [
        ("four", json!("queue"), json!(4)),
        ("one", json!("skip"), Value::Null),
        ("free", json!("allow"), Value::Null),
    ] {
        upsert(
            &api,
            json!({"schedule_id": id, "workflow_id": "wa", "version": 1, "user_id": "u1",
                   "cron_expr": "0 * * * *", "timezone": "UTC", "overlap_policy": overlap,
                   "max_in_flight": limit}),
        )
        .await;
    }
    for (id, said) in [
        ("four", "<dt>Runs in flight at most</dt><dd>4</dd>"),
        ("one", "<dt>Runs in flight at most</dt><dd>1</dd>"),
        (
            "free",
            "<dt>Runs in flight at most</dt><dd>no limit (overlap allow)</dd>",
        ),
    ] {
        let body = page(&api, &format!("/ui/fragments/schedules/{id}"), READER).await;
        assert!(body.contains(said), "{id}: {body}");
    }
}
