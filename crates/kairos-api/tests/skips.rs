//! Skips and pause-until through the real router on a real database: a skip is recorded
//! with the caller's token name, listed, shown in the explained previews (the schedule's
//! and `POST /schedules/preview`'s) and taken back; bad input is a 400 naming `run_at` or
//! `until`, storing nothing; a pause until a time shows `paused_until` and `paused_by`.

use crate::common;

use axum::http::{Method, StatusCode};
use axum::Router;
use common::{call, deploy_workflow, router, upsert_new, DEPLOYER, READER};
use kairos_testkit::{sqlx, TestDb};
use serde_json::{json, Value};

const NOW: &str = "2026-03-09T10:30:00Z";

async fn setup(api: &Router) {
    deploy_workflow(api, "wf", 1).await;
    let body = json!({"schedule_id": "hourly", "workflow_id": "wf", "version": 1,
                      "user_id": "u", "cron_expr": "0 * * * *", "timezone": "UTC"});
    upsert_new(api, body).await;
}

/// The one field a 400 names, and its rule.
fn named(answer: &Value) -> (String, String) {
    let errors = answer["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 1, "{answer}");
    (
        errors[0]["field"].as_str().expect("field").to_string(),
        errors[0]["rule"].as_str().unwrap_or_default().to_string(),
    )
}

async fn skip_count(pool: &kairos_store::PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from schedule_skips")
        .fetch_one(pool)
        .await
        .expect("count")
}

#[tokio::test]
async fn a_skip_is_recorded_with_who_listed_previewed_and_taken_back() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    setup(&api).await;
    let body = json!({"run_at": "2026-03-09T12:00:00Z", "note": "vendor freeze"});
    let uri = "/schedules/hourly/skips";
    let (status, _, skip) = call(&api, Method::POST, uri, Some(DEPLOYER), Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{skip}");
    assert_eq!(skip["skipped_by"], "compiler", "the deployer token's name");
    assert_eq!(skip["reason"], "skipped by compiler: vendor freeze");
    assert_eq!(skip["run_at"], "2026-03-09T12:00:00Z");

    let (status, _, listed) = call(&api, Method::GET, uri, Some(READER), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed["skips"], json!([skip]));

    let (_, _, schedule) = call(
        &api,
        Method::GET,
        "/schedules/hourly?explain=true",
        Some(READER),
        None,
    )
    .await;
    let explained = schedule["explained_preview"].as_array().expect("explained");
    assert_eq!(explained[1]["at"], "2026-03-09T12:00:00Z");
    assert_eq!(
        explained[1]["skipped"]["reason"],
        "skipped by compiler: vendor freeze"
    );
    assert!(explained[0].get("skipped").is_none(), "{}", explained[0]);

    let preview = json!({"cron_expr": "0 * * * *", "timezone": "UTC",
                         "schedule_id": "hourly", "explain": true});
    let (status, _, answer) = call(
        &api,
        Method::POST,
        "/schedules/preview",
        Some(READER),
        Some(preview),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["skipped"][0]["run_at"], "2026-03-09T12:00:00Z");
    assert_eq!(answer["ticks"][1]["skipped"]["skipped_by"], "compiler");

    let (status, _, _) = call(
        &api,
        Method::DELETE,
        "/schedules/hourly/skips/2026-03-09T12%3A00%3A00Z",
        Some(DEPLOYER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(skip_count(&pool).await, 0);
    let (status, _, answer) = call(
        &api,
        Method::DELETE,
        "/schedules/hourly/skips/2026-03-09T12:00:00Z",
        Some(DEPLOYER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");

    // The skip and its taking back are in the history of changes, by the caller.
    let (status, _, history) = call(
        &api,
        Method::GET,
        "/schedules/hourly/history",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{history}");
    let entries = history["history"].as_array().expect("history");
    let of = |kind: &str| {
        entries
            .iter()
            .filter(|e| e["kind"] == kind)
            .cloned()
            .collect::<Vec<_>>()
    };
    let (skipped, unskipped) = (of("skip"), of("unskip"));
    assert_eq!((skipped.len(), unskipped.len()), (1, 1), "{history}");
    assert_eq!(skipped[0]["actor"], "compiler");
    assert_eq!(skipped[0]["note"], "vendor freeze");
    assert_eq!(
        skipped[0]["changes"],
        json!([{"field": "skipped_tick", "old": null, "new": "2026-03-09T12:00:00Z"}])
    );
    assert_eq!(unskipped[0]["actor"], "compiler");
    assert_eq!(
        unskipped[0]["changes"],
        json!([{"field": "skipped_tick", "old": "2026-03-09T12:00:00Z", "new": null}])
    );
}

#[tokio::test]
async fn bad_skips_are_refused_naming_run_at_and_storing_nothing() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    setup(&api).await;
    let uri = "/schedules/hourly/skips";
    for (run_at, says) in [
        ("2026-03-09T12:30:00Z", "2026-03-09T12:00:00Z"),
        ("2026-03-09T10:00:00Z", "not in the future"),
        ("tomorrow", "RFC 3339"),
    ] {
        let body = json!({"run_at": run_at});
        let (status, _, answer) = call(&api, Method::POST, uri, Some(DEPLOYER), Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{run_at}: {answer}");
        let (field, rule) = named(&answer);
        assert_eq!(field, "run_at");
        assert!(rule.contains(says), "{run_at}: {rule}");
    }
    let (_, _, answer) = call(
        &api,
        Method::POST,
        uri,
        Some(DEPLOYER),
        Some(json!({"run_at": "2026-03-09T12:30:00Z"})),
    )
    .await;
    assert!(
        named(&answer).1.contains("2026-03-09T13:00:00Z"),
        "both nearest fire times are named: {answer}"
    );
    let (status, _, _) = call(
        &api,
        Method::POST,
        uri,
        Some(READER),
        Some(json!({"run_at": "2026-03-09T12:00:00Z"})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a reader may not skip");
    assert_eq!(skip_count(&pool).await, 0, "nothing stored");
}

#[tokio::test]
async fn pause_until_shows_until_and_who_and_bad_until_is_refused() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    setup(&api).await;
    let pause = |body: Value| {
        let api = api.clone();
        async move {
            call(
                &api,
                Method::POST,
                "/schedules/pause",
                Some(DEPLOYER),
                Some(body),
            )
            .await
        }
    };
    for (body, says) in [
        (
            json!({"schedule_id": "hourly", "paused": true, "until": "2026-03-09T10:00:00Z"}),
            "not in the future",
        ),
        (
            json!({"schedule_id": "hourly", "paused": false, "until": "2026-03-09T12:00:00Z"}),
            "paused: true",
        ),
        (
            json!({"schedule_id": "hourly", "paused": true, "until": "noon"}),
            "RFC 3339",
        ),
    ] {
        let (status, _, answer) = pause(body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        let (field, rule) = named(&answer);
        assert_eq!(field, "until");
        assert!(rule.contains(says), "{body}: {rule}");
    }
    let (_, _, schedule) = call(&api, Method::GET, "/schedules/hourly", Some(READER), None).await;
    assert_eq!(schedule["paused"], false, "nothing changed");

    let (status, _, _) = pause(json!({"schedule_id": "hourly", "paused": true,
        "note": "vendor freeze", "until": "2026-03-09T12:00:00Z"}))
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, _, schedule) = call(&api, Method::GET, "/schedules/hourly", Some(READER), None).await;
    assert_eq!(schedule["paused_until"], "2026-03-09T12:00:00Z");
    assert_eq!(schedule["paused_by"], "compiler");
    assert_eq!(schedule["pause_note"], "vendor freeze");
    assert_eq!(
        schedule["preview"][0], "2026-03-09T12:00:00Z",
        "the preview starts when the pause ends"
    );
    let (_, _, explained) = call(
        &api,
        Method::GET,
        "/schedules/hourly?explain=true",
        Some(READER),
        None,
    )
    .await;
    let explained_pause = &explained["explained_pause"];
    assert_eq!(
        (
            &explained_pause["until"],
            &explained_pause["paused_by"],
            &explained_pause["note"],
        ),
        (
            &json!("2026-03-09T12:00:00Z"),
            &json!("compiler"),
            &json!("vendor freeze")
        ),
        "{explained}"
    );
    let reason = explained_pause["reason"].as_str().expect("reason");
    assert!(
        reason.starts_with("paused until 2026-03-09T12:00:00Z by compiler: vendor freeze")
            && reason.contains("catch-up none"),
        "{reason}"
    );
    assert_eq!(
        explained["explained_preview"][0]["at"],
        "2026-03-09T12:00:00Z"
    );

    let (status, _, _) = pause(json!({"schedule_id": "hourly", "paused": false})).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, _, schedule) = call(&api, Method::GET, "/schedules/hourly", Some(READER), None).await;
    assert_eq!(
        (&schedule["paused_until"], &schedule["paused_by"]),
        (&Value::Null, &Value::Null),
        "a manual resume clears them"
    );
    let (_, _, explained) = call(
        &api,
        Method::GET,
        "/schedules/hourly?explain=true",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(
        explained["explained_pause"],
        Value::Null,
        "running: no pause"
    );
}

#[tokio::test]
async fn a_dry_run_upsert_shows_the_skipped_fire_times() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    setup(&api).await;
    let body = json!({"run_at": "2026-03-09T12:00:00Z", "note": "vendor freeze"});
    let uri = "/schedules/hourly/skips";
    let (status, _, skip) = call(&api, Method::POST, uri, Some(DEPLOYER), Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{skip}");

    let change = json!({"schedule_id": "hourly", "workflow_id": "wf", "version": 1,
                        "user_id": "u", "cron_expr": "0 * * * *", "timezone": "UTC",
                        "jitter_ms": 1000});
    let (status, _, answer) = call(
        &api,
        Method::POST,
        "/schedules/upsert?dry_run=true",
        Some(DEPLOYER),
        Some(change),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let one = &answer["schedules"][0];
    assert_eq!(one["change"], "updated", "{answer}");
    assert_eq!(one["next_fire_times_after"][1], "2026-03-09T12:00:00Z");
    assert_eq!(
        one["skipped"],
        json!([skip]),
        "the skipped fire time, with who and why"
    );

    // A change that no longer fires at the skipped time shows no skip after it.
    let odd = json!({"schedule_id": "hourly", "workflow_id": "wf", "version": 1,
                     "user_id": "u", "cron_expr": "30 * * * *", "timezone": "UTC"});
    let (status, _, answer) = call(
        &api,
        Method::POST,
        "/schedules/upsert?dry_run=true",
        Some(DEPLOYER),
        Some(odd),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let one = &answer["schedules"][0];
    assert_eq!(one["next_fire_times_before"][1], "2026-03-09T12:00:00Z");
    assert_eq!(
        one["skipped"],
        json!([skip]),
        "still among the times before"
    );
    assert_eq!(skip_count(&pool).await, 1, "nothing stored");
}
