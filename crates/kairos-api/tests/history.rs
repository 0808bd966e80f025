//! The history of changes through the router on a real database: every kind of write
//! records exactly one change with its actor (the token's name, or `anonymous` without
//! auth), request id, note and fields old → new, and a refused or rolled-back write records
//! nothing.

use crate::common;
use crate::history_support;

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use common::*;
use history_support::*;
use kairos_api::{app, AppState};
use kairos_auth::{AuthConfig, AuthMode, Authenticator};
use kairos_registrar::{Registrar, Settings};
use kairos_testkit::{sqlx, TestDb};
use kairos_worker::intake::Intake;
use serde_json::json;

const NOW: &str = "2026-03-09T12:00:00Z";

#[tokio::test]
async fn every_kind_of_write_records_one_change_with_actor_request_and_fields() {
    let db = TestDb::new().await;
    let pool = &db.pool();
    let router = router(pool.clone(), NOW);

    // A workflow version: created.
    let dag = json!({"dag": {"nodes": [{"id": "a"}]}});
    let (status, _) = send(
        &router,
        Method::PUT,
        "/workflows/report/versions/3",
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
        status_subjects: kairos_launcher::status::StatusSubjects {
            prefix: "kairos".into(),
            partitions: 16,
        },
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

#[tokio::test]
async fn with_a_jwt_the_actor_is_its_subject() {
    let db = TestDb::new().await;
    let pool = &db.pool();
    let secret = "hs256-secret-of-the-history-test";
    let config = AuthConfig {
        mode: AuthMode::Jwt,
        audience: Some("kairos".into()),
        jwt_hs256_secret: Some(secret.into()),
        ..AuthConfig::default()
    };
    let router = app(AppState {
        intake: Intake::new(pool.clone()),
        nats: None,
        registrar: Registrar::new(pool.clone(), Settings::default()),
        auth: Arc::new(Authenticator::from_config(&config).expect("jwt config")),
        max_body_bytes: MAX_BODY,
        allowed_hosts: allowed_hosts(),
        metrics: None,
        status_subjects: kairos_launcher::status::StatusSubjects {
            prefix: "kairos".into(),
            partitions: 16,
        },
    });
    let exp = chrono::Utc::now().timestamp() + 600;
    let claims = json!({"sub": "release-bot", "aud": "kairos", "exp": exp, "role": "deployer"});
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
    )
    .expect("encode");
    let dag = json!({"dag": {"nodes": [{"id": "a"}]}});
    let (status, _, body) = call(
        &router,
        Method::PUT,
        "/workflows/report/versions/3",
        Some(&token),
        Some(dag),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let actor: String = sqlx::query_scalar("select actor from change_history")
        .fetch_one(pool)
        .await
        .expect("one change");
    assert_eq!(actor, "release-bot");
}
