//! The history of changes through the router on a real database: every kind of write
//! records exactly one change with its actor (the token's name, or `anonymous` without
//! auth), request id, note and fields old → new; a refused write records nothing; both
//! listings page without gaps or repeats and filter; and a run keeps the schedule revision
//! that produced it.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use common::*;
use http_body_util::BodyExt;
use kairos_api::{app, AppState};
use kairos_auth::{AuthConfig, AuthMode, Authenticator};
use kairos_registrar::{Registrar, Settings};
use kairos_store::PgPool;
use kairos_testkit::{sqlx, TestDb};
use kairos_worker::intake::Intake;
use serde_json::{json, Value};
use tower::ServiceExt;

const NOW: &str = "2026-03-09T12:00:00Z";

/// One request with `X-Request-Id: request_id`; answers status and JSON body.
async fn send(
    router: &Router,
    method: Method,
    uri: &str,
    request_id: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let bytes = body.map_or_else(Vec::new, |b| serde_json::to_vec(&b).expect("json"));
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::AUTHORIZATION, format!("Bearer {DEPLOYER}"))
        .header("x-request-id", request_id)
        .body(Body::from(bytes))
        .expect("request");
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).expect("json answer")
    };
    (status, body)
}

/// `GET uri` as the reader; the answer must be 200.
async fn read(router: &Router, uri: &str) -> Value {
    let (status, _, body) = call(router, Method::GET, uri, Some(READER), None).await;
    assert_eq!(status, StatusCode::OK, "{uri}: {body}");
    body
}

/// Every change recorded in request `request_id` (read straight from the table).
async fn rows_of(pool: &PgPool, request_id: &str) -> Vec<(String, String, Option<String>, Value)> {
    sqlx::query_as(
        "select kind, actor, note, changes from change_history where request_id = $1 order by id",
    )
    .bind(request_id)
    .fetch_all(pool)
    .await
    .expect("history rows")
}

async fn history_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from change_history")
        .fetch_one(pool)
        .await
        .expect("count")
}

/// The one change of request `request_id`: its kind, actor and note, and its fields as
/// `field → [old, new]`.
async fn one_change(
    pool: &PgPool,
    request_id: &str,
) -> (
    String,
    String,
    Option<String>,
    serde_json::Map<String, Value>,
) {
    let mut rows = rows_of(pool, request_id).await;
    assert_eq!(rows.len(), 1, "request {request_id}: {rows:?}");
    let (kind, actor, note, changes) = rows.remove(0);
    let fields = changes
        .as_array()
        .expect("changes is an array")
        .iter()
        .map(|c| {
            let name = c["field"].as_str().expect("field").to_string();
            (name, json!([c["old"], c["new"]]))
        })
        .collect();
    (kind, actor, note, fields)
}

fn upsert_body(cron: &str) -> Value {
    let mut body = seed_body();
    body["cron_expr"] = json!(cron);
    body
}

#[tokio::test]
async fn every_kind_of_write_records_one_change_with_actor_request_and_fields() {
    let db = TestDb::new().await;
    let pool = &db.pool();
    let router = router(pool.clone(), NOW);
    let put = |uri: &str| uri.to_string();

    // A workflow version: created.
    let dag = json!({"dag": {"nodes": [{"id": "a"}]}});
    let (status, _) = send(
        &router,
        Method::PUT,
        &put("/workflows/report/versions/3"),
        "w1",
        Some(dag),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (kind, actor, _, fields) = one_change(pool, "w1").await;
    assert_eq!((kind.as_str(), actor.as_str()), ("create", "compiler"));
    assert_eq!(fields["version"], json!([null, 3]));

    // A schedule: created (every field new), then updated (only what changed).
    let (status, _) = send(
        &router,
        Method::POST,
        "/schedules/upsert",
        "u1",
        Some(upsert_body("0 7 * * *")),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (kind, actor, _, fields) = one_change(pool, "u1").await;
    assert_eq!((kind.as_str(), actor.as_str()), ("create", "compiler"));
    assert_eq!(fields["cron_expr"], json!([null, "0 7 * * *"]));
    assert_eq!(fields["timezone"], json!([null, "America/New_York"]));
    assert_eq!(fields["overlap_policy"], json!([null, "skip"]));
    let (status, _) = send(
        &router,
        Method::POST,
        "/schedules/upsert",
        "u2",
        Some(upsert_body("0 8 * * *")),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (kind, _, _, fields) = one_change(pool, "u2").await;
    assert_eq!(kind, "update");
    assert_eq!(fields.len(), 1, "only the spec changed: {fields:?}");
    assert_eq!(fields["cron_expr"], json!(["0 7 * * *", "0 8 * * *"]));
    // The same body again writes nothing, so records nothing.
    send(
        &router,
        Method::POST,
        "/schedules/upsert",
        "u3",
        Some(upsert_body("0 8 * * *")),
    )
    .await;
    assert!(rows_of(pool, "u3").await.is_empty());

    // Pause with a note, then resume.
    let pause = json!({"schedule_id": "nightly-report", "paused": true, "note": "db migration"});
    let (status, _) = send(&router, Method::POST, "/schedules/pause", "p1", Some(pause)).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (kind, _, note, fields) = one_change(pool, "p1").await;
    assert_eq!(
        (kind.as_str(), note.as_deref()),
        ("pause", Some("db migration"))
    );
    assert_eq!(fields["paused"], json!([false, true]));
    assert_eq!(fields["pause_note"], json!([null, "db migration"]));
    let resume = json!({"schedule_id": "nightly-report", "paused": false});
    send(
        &router,
        Method::POST,
        "/schedules/pause",
        "p2",
        Some(resume),
    )
    .await;
    let (kind, _, note, fields) = one_change(pool, "p2").await;
    assert_eq!((kind.as_str(), note), ("resume", None));
    assert_eq!(fields["paused"], json!([true, false]));

    // Trigger, then cancel the run it made.
    let trigger = json!({"request_id": "t1"});
    let (status, run) = send(
        &router,
        Method::POST,
        "/schedules/nightly-report/trigger",
        "t1",
        Some(trigger),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let key = run["idempotency_key"].as_str().expect("key").to_string();
    let (kind, _, _, fields) = one_change(pool, "t1").await;
    assert_eq!(kind, "trigger");
    assert_eq!(fields["run"], json!([null, key]));
    let cancel = json!({"reason": "wrong input"});
    let (status, _) = send(
        &router,
        Method::POST,
        &format!("/runs/{key}/cancel"),
        "c1",
        Some(cancel),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (kind, actor, note, fields) = one_change(pool, "c1").await;
    assert_eq!((kind.as_str(), actor.as_str()), ("cancel", "compiler"));
    assert_eq!(note.as_deref(), Some("wrong input"));
    assert_eq!(fields["status"], json!(["PENDING", "CANCELLED"]));
    // Cancelling it again changes nothing and records nothing.
    send(
        &router,
        Method::POST,
        &format!("/runs/{key}/cancel"),
        "c2",
        None,
    )
    .await;
    assert!(rows_of(pool, "c2").await.is_empty());

    // Retry of a failed run.
    sqlx::query(
        "update schedule_runs set status = 'FAILED', published_at = now(), \
         finished_at = now(), reason = null where idempotency_key = $1",
    )
    .bind(&key)
    .execute(pool)
    .await
    .expect("fail the run");
    let (status, body) = send(
        &router,
        Method::POST,
        &format!("/runs/{key}/retry"),
        "r1",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (kind, _, _, fields) = one_change(pool, "r1").await;
    assert_eq!(kind, "retry");
    assert_eq!(fields["attempt"], json!([1, 2]));
    assert_eq!(fields["status"][0], json!("FAILED"));

    // Backfill of past ticks.
    let range = json!({"from": "2026-03-05T00:00:00Z", "to": "2026-03-07T00:00:00Z"});
    let (status, body) = send(
        &router,
        Method::POST,
        "/schedules/nightly-report/backfill",
        "b1",
        Some(range),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (kind, _, _, fields) = one_change(pool, "b1").await;
    assert_eq!(kind, "backfill");
    assert_eq!(fields["from"], json!([null, "2026-03-05T00:00:00Z"]));
    assert_eq!(fields["runs_created"], json!([null, body["created"]]));

    // A calendar: created, replaced, deleted.
    let dates = json!({"dates": ["2026-12-25"]});
    send(
        &router,
        Method::PUT,
        "/calendars/holidays",
        "k1",
        Some(dates),
    )
    .await;
    let (kind, _, _, fields) = one_change(pool, "k1").await;
    assert_eq!(kind, "create");
    assert_eq!(fields["dates"], json!([null, ["2026-12-25"]]));
    let dates = json!({"dates": ["2026-12-25", "2026-12-26"]});
    send(
        &router,
        Method::PUT,
        "/calendars/holidays",
        "k2",
        Some(dates),
    )
    .await;
    let (kind, _, _, fields) = one_change(pool, "k2").await;
    assert_eq!(kind, "update");
    assert_eq!(
        fields["dates"],
        json!([["2026-12-25"], ["2026-12-25", "2026-12-26"]])
    );
    let (status, _) = send(&router, Method::DELETE, "/calendars/holidays", "k3", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (kind, _, _, fields) = one_change(pool, "k3").await;
    assert_eq!(kind, "delete");
    assert_eq!(fields["dates"], json!([["2026-12-25", "2026-12-26"], null]));

    // A deploy sync that changes one schedule and creates another: one change each.
    let mut changed = upsert_body("0 9 * * *");
    changed
        .as_object_mut()
        .expect("object")
        .remove("schedule_id");
    changed["schedule_id"] = json!("nightly-report");
    let mut added = upsert_body("0 10 * * *");
    added["schedule_id"] = json!("morning");
    let deploy = json!({"dag": {"nodes": [{"id": "a"}]}, "schedules": [changed, added]});
    let (status, body) = send(
        &router,
        Method::PUT,
        "/workflows/report/versions/3",
        "d1",
        Some(deploy),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let rows = rows_of(pool, "d1").await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|(kind, ..)| kind == "deploy_sync"));
    // A deploy that leaves `morning` out deletes it: its change has only old values.
    let deploy = json!({"dag": {"nodes": [{"id": "a"}]}, "schedules": [upsert_body("0 9 * * *")]});
    send(
        &router,
        Method::PUT,
        "/workflows/report/versions/3",
        "d2",
        Some(deploy),
    )
    .await;
    let (kind, _, _, fields) = one_change(pool, "d2").await;
    assert_eq!(kind, "deploy_sync");
    assert_eq!(fields["cron_expr"], json!(["0 10 * * *", null]));

    // Delete: every field old.
    let (status, _) = send(
        &router,
        Method::DELETE,
        "/schedules/nightly-report",
        "x1",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (kind, _, _, fields) = one_change(pool, "x1").await;
    assert_eq!(kind, "delete");
    assert_eq!(fields["cron_expr"], json!(["0 9 * * *", null]));

    // The schedule's history, newest first, still readable after the delete.
    let page = read(&router, "/schedules/nightly-report/history?limit=1000").await;
    let kinds: Vec<&str> = page["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|c| c["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(
        kinds,
        [
            "delete",
            "deploy_sync",
            "backfill",
            "retry",
            "cancel",
            "trigger",
            "resume",
            "pause",
            "update",
            "create"
        ]
    );
    let newest = &page["history"][0];
    assert_eq!(newest["actor"], "compiler");
    assert_eq!(newest["request_id"], "x1");
    assert_eq!(newest["at"], NOW);
    assert_eq!(newest["workflow_id"], "report");
}

#[tokio::test]
async fn a_refused_write_records_nothing() {
    let db = TestDb::new().await;
    let pool = &db.pool();
    let router = router(pool.clone(), NOW);
    deploy_workflow(&router, "report", 3).await;
    send(
        &router,
        Method::POST,
        "/schedules/upsert",
        "ok",
        Some(seed_body()),
    )
    .await;
    let before = history_count(pool).await;
    let refused = [
        ("/schedules/upsert", Some(upsert_body("61 * * * *"))),
        (
            "/schedules/pause",
            Some(
                json!({"schedule_id": "nightly-report", "paused": true, "note": "x".repeat(1001)}),
            ),
        ),
        (
            "/schedules/nightly-report/backfill",
            Some(json!({"from": "2026-03-07T00:00:00Z", "to": "2026-03-05T00:00:00Z"})),
        ),
        (
            "/schedules/nightly-report/trigger",
            Some(json!({"request_id": "has space"})),
        ),
    ];
    for (n, (uri, body)) in refused.into_iter().enumerate() {
        let (status, answer) = send(&router, Method::POST, uri, &format!("bad{n}"), body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}: {answer}");
    }
    let (status, _) = send(
        &router,
        Method::PUT,
        "/calendars/c1",
        "bad-cal",
        Some(json!({"dates": ["2026-02-30"]})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // A stale revision is a 409: nothing recorded either.
    let mut stale = upsert_body("0 9 * * *");
    stale["revision"] = json!(99);
    let (status, _) = send(
        &router,
        Method::POST,
        "/schedules/upsert",
        "stale",
        Some(stale),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    // A dry-run does the whole write, its change included, in a transaction it rolls back:
    // the change goes with it.
    let changed = upsert_body("0 9 * * *");
    let (status, body) = send(
        &router,
        Method::POST,
        "/schedules/upsert?dry_run=true",
        "dry",
        Some(changed),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let deploy = json!({"dag": {"nodes": [{"id": "a"}]}, "schedules": [upsert_body("0 10 * * *")]});
    let (status, body) = send(
        &router,
        Method::PUT,
        "/workflows/report/versions/3?dry_run=true",
        "dry2",
        Some(deploy),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(history_count(pool).await, before);
}

#[tokio::test]
async fn without_auth_the_actor_is_anonymous() {
    let db = TestDb::new().await;
    let pool = &db.pool();
    let auth = Authenticator::from_config(&AuthConfig {
        mode: AuthMode::None,
        ..AuthConfig::default()
    })
    .expect("auth none");
    let router = app(AppState {
        intake: Intake::new(pool.clone()),
        nats: None,
        registrar: Registrar::new(pool.clone(), Settings::default()),
        auth: Arc::new(auth),
        max_body_bytes: MAX_BODY,
        allowed_hosts: allowed_hosts(),
        metrics: None,
    });
    deploy_workflow(&router, "report", 3).await;
    send(
        &router,
        Method::POST,
        "/schedules/upsert",
        "a1",
        Some(seed_body()),
    )
    .await;
    let (kind, actor, _, _) = one_change(pool, "a1").await;
    assert_eq!((kind.as_str(), actor.as_str()), ("create", "anonymous"));
}

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
