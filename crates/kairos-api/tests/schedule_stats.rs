//! `GET /schedules/{id}` stats on a real database: runs are driven into known states with
//! the statements the dispatcher, the executor callback and the registrar use (dispatch
//! outcome, `POST /runs/{key}/status`, pause), then the stats must tell that story.

use crate::common;

use axum::http::{Method, StatusCode};
use common::{call, deploy_workflow, router, ts, DEPLOYER, EXECUTOR, READER};
use kairos_core::{RunKey, RunSource, RunStatus};
use kairos_store::dispatch::{self, Outcome, RunSpan};
use kairos_store::runs::{self, NewRun};
use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use serde_json::json;

const NOW: &str = "2026-03-08T12:00:00Z";

fn enqueued(key: &str, at: &str) -> Outcome {
    Outcome::enqueued(key, 1, true, Some(ts(at)))
}

#[tokio::test]
async fn get_shows_last_fire_missed_skipped_and_why() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), NOW);
    deploy_workflow(&api, "wa", 1).await;
    let body = json!({"schedule_id": "s1", "workflow_id": "wa", "version": 1, "user_id": "u1",
        "cron_expr": "0 * * * *", "timezone": "UTC"});
    let (status, _, _) = call(
        &api,
        Method::POST,
        "/schedules/upsert",
        Some(DEPLOYER),
        Some(body),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);

    // Nothing ran yet: empty stats, not an error.
    let (_, _, body) = call(&api, Method::GET, "/schedules/s1", Some(READER), None).await;
    assert_eq!(
        body["stats"],
        json!({"last_fire_at": null, "last_status": null, "missed_ticks": 0,
               "skipped_ticks": 0, "runs_examined": 0, "last_not_launched": null,
               "planner_error": null, "why": null})
    );

    // Ticks 08:00 (launched, then SUCCESS), 09:00 (skipped: overlap), 10:00 (launched,
    // STARTED), 13:00 (planned; the pause below cancels it).
    let key = |at: &str| RunKey::tick("s1", ts(at)).as_str().to_string();
    let ticks = [
        "2026-03-08T08:00:00Z",
        "2026-03-08T09:00:00Z",
        "2026-03-08T10:00:00Z",
        "2026-03-08T13:00:00Z",
    ];
    for at in ticks {
        let run = NewRun {
            idempotency_key: key(at),
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
        runs::insert(&pool, &run, ts(at)).await.expect("insert run");
    }
    let mut conn = pool.acquire().await.expect("conn");
    let span = RunSpan::between(ts(ticks[0]), ts(ticks[3]));
    let first = [enqueued(&key(ticks[0]), ticks[0])];
    dispatch::record(&mut conn, &first, span, ts(ticks[0]))
        .await
        .expect("record");
    let status_uri = format!("/runs/{}/status", key(ticks[0]));
    let (status, _, _) = call(
        &api,
        Method::POST,
        &status_uri,
        Some(EXECUTOR),
        Some(json!({"status": "SUCCESS", "executor_id": "ex1"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let skip = format!("overlap skip: run {} is in flight", key(ticks[2]));
    let rest = [
        Outcome::skipped(&key(ticks[1]), skip.clone()),
        enqueued(&key(ticks[2]), ticks[2]),
    ];
    dispatch::record(&mut conn, &rest, span, ts(ticks[2]))
        .await
        .expect("record");
    drop(conn);
    sqlx::query("update schedules set missed_ticks = 3 where schedule_id = 's1'")
        .execute(&pool)
        .await
        .expect("planner's counter");

    let (_, _, body) = call(&api, Method::GET, "/schedules/s1", Some(READER), None).await;
    assert_eq!(
        body["stats"],
        json!({"last_fire_at": "2026-03-08T10:00:00Z", "last_status": "ENQUEUED",
               "missed_ticks": 3, "skipped_ticks": 1, "runs_examined": 4,
               "last_not_launched": {"run_at": "2026-03-08T09:00:00Z", "status": "SKIPPED",
                                     "reason": skip, "last_error": null},
               "planner_error": null, "why": format!("SKIPPED: {skip}")})
    );

    // Pausing cancels the planned 13:00 tick: that is now the last tick that did not launch.
    let (status, _, _) = call(
        &api,
        Method::POST,
        "/schedules/pause",
        Some(DEPLOYER),
        Some(json!({"schedule_id": "s1", "paused": true})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, _, body) = call(&api, Method::GET, "/schedules/s1", Some(READER), None).await;
    assert_eq!(
        body["stats"]["last_not_launched"]["run_at"],
        json!("2026-03-08T13:00:00Z")
    );
    assert_eq!(body["stats"]["why"], json!("CANCELLED: paused"));

    // A parked schedule: the planner's error is the why.
    sqlx::query("update schedules set planner_error = 'cron_expr: no longer parses'")
        .execute(&pool)
        .await
        .expect("park");
    let (_, _, body) = call(&api, Method::GET, "/schedules/s1", Some(READER), None).await;
    assert_eq!(
        body["stats"]["why"],
        json!("planner_error: cron_expr: no longer parses")
    );

    // Listing does not compute stats (one statement per schedule would be a page of them).
    let (_, _, page) = call(&api, Method::GET, "/schedules", Some(READER), None).await;
    assert!(page["schedules"][0].get("stats").is_none());
}
