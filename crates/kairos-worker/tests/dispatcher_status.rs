//! Status intake and the run launcher on real PostgreSQL and nats-server: out-of-order and
//! repeated callbacks never move a run backwards, a second executor is refused, the NATS
//! status subject feeds the same state machine, and `start_run` is idempotent by key.

use crate::dispatcher_support;

use kairos_testkit::TestDb;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use dispatcher_support::{
    config, field, key, nats, run, schedule, spawn_status_intake, stream_ids, until, workflow,
};
use kairos_core::{Reported, RunStatus};
use kairos_launcher::status::{publish_status, read_stream, STATUS_STREAM};
use kairos_store::PgPool;
use kairos_worker::dispatcher::Dispatcher;
use kairos_worker::intake::{Applied, StatusReport};
use kairos_worker::intake::{Error, Intake, StartRequest};
use serde_json::json;

fn report(status: Reported, executor: &str) -> StatusReport {
    StatusReport {
        status,
        attempt: None,
        retryable: None,
        run_id: Some("r-1".into()),
        executor_id: Some(executor.into()),
        error: (status == Reported::Failed).then(|| "boom".to_string()),
        log_url: None,
        output: None,
    }
}

/// One report through an intake of its own.
async fn apply(intake: &Intake, key: &str, report: &StatusReport) -> Result<Applied, Error> {
    intake.report(key, report).await
}

async fn status_of(pool: &PgPool, n: u64) -> RunStatus {
    let status = field(pool, &key(n), "status").await.expect("status");
    status.parse().expect("a run status")
}

/// One ENQUEUED run `key(1)` of an `allow` schedule.
async fn enqueued_run(
    pool: &PgPool,
) -> (kairos_testkit::NatsServer, kairos_launcher::NatsLauncher) {
    let (server, launcher) = nats().await;
    workflow(pool).await;
    schedule(pool, "s", "allow", None).await;
    run(pool, &key(1), "s", -1.0).await;
    let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), config());
    dispatcher.round().await.expect("round");
    (server, launcher)
}

#[tokio::test]
async fn callbacks_out_of_order_and_repeated_never_regress() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let _nats = enqueued_run(&pool).await;
    let intake = Intake::new(pool.clone());
    let k = key(1);
    let success = apply(&intake, &k, &report(Reported::Success, "e1")).await;
    assert!(matches!(success, Ok(Applied::Moved(ref run)) if run.status == RunStatus::Success));
    for late in [Reported::Started, Reported::Success, Reported::Failed] {
        let again = apply(&intake, &k, &report(late, "e1")).await;
        assert!(
            matches!(again, Ok(Applied::Unchanged(ref run)) if run.status == RunStatus::Success),
            "{late:?} after SUCCESS: {again:?}"
        );
    }
    let unknown = apply(&intake, &key(99), &report(Reported::Started, "e1")).await;
    assert!(matches!(unknown, Ok(Applied::NotFound)));
    assert!(
        field(&pool, &k, "started_at").await.is_none(),
        "straight to SUCCESS"
    );
    assert!(field(&pool, &k, "finished_at").await.is_some());
}

#[tokio::test]
async fn the_first_started_executor_owns_the_run() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let _nats = enqueued_run(&pool).await;
    let intake = Intake::new(pool.clone());
    let k = key(1);
    let first = apply(&intake, &k, &report(Reported::Started, "e1")).await;
    assert!(matches!(first, Ok(Applied::Moved(ref run)) if run.status == RunStatus::Started));
    let again = apply(&intake, &k, &report(Reported::Started, "e1")).await;
    assert!(matches!(again, Ok(Applied::Unchanged(_))));
    let other = apply(&intake, &k, &report(Reported::Started, "e2")).await;
    assert!(matches!(other, Ok(Applied::Conflict { ref owner, .. }) if owner == "e1"));
    let other_end = apply(&intake, &k, &report(Reported::Success, "e2")).await;
    assert!(matches!(other_end, Ok(Applied::Conflict { .. })));
    let failed = apply(&intake, &k, &report(Reported::Failed, "e1")).await;
    assert!(matches!(failed, Ok(Applied::Moved(ref run)) if run.status == RunStatus::Failed));
    assert_eq!(
        field(&pool, &k, "last_error").await.as_deref(),
        Some("boom")
    );
    let late_other = apply(&intake, &k, &report(Reported::Started, "e2")).await;
    assert!(
        matches!(late_other, Ok(Applied::Conflict { .. })),
        "never run twice"
    );
}

#[tokio::test]
async fn the_nats_status_subject_feeds_the_same_state_machine() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = enqueued_run(&pool).await;
    let intake = spawn_status_intake(&pool, &launcher).await;
    let event = |status: &str, executor: &str| json!({"idempotency_key": key(1), "status": status, "executor_id": executor});
    // Out of order (SUCCESS first), repeated, and from a second executor.
    for event in [
        event("SUCCESS", "e1"),
        event("STARTED", "e1"),
        event("STARTED", "e2"),
        event("SUCCESS", "e1"),
    ] {
        publish_status(&launcher, "kairos", &key(1), &event)
            .await
            .expect("publish status");
    }
    until(Duration::from_secs(10), "status stream drained", || async {
        read_stream(&launcher, STATUS_STREAM)
            .await
            .expect("read")
            .is_empty()
    })
    .await;
    assert_eq!(status_of(&pool, 1).await, RunStatus::Success);
    assert_eq!(
        field(&pool, &key(1), "executor_id").await.as_deref(),
        Some("e1")
    );
    intake.end().await;
}

#[tokio::test]
async fn start_run_is_idempotent_by_key() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), config());
    let intake = Intake::new(pool.clone());
    intake.attach(std::sync::Arc::new(dispatcher));
    let request = StartRequest {
        idempotency_key: "order-42".into(),
        workflow_id: "wf".into(),
        version: 1,
        user_id: "u".into(),
        scheduled_for: Utc.with_ymd_and_hms(2026, 3, 9, 7, 0, 0).unwrap(),
    };
    let first = intake.start(&request).await.expect("start");
    assert!(first.started);
    assert_eq!(first.status, RunStatus::Enqueued);
    let second = intake.start(&request).await.expect("start again");
    assert!(!second.started);
    assert_eq!(stream_ids(&launcher).await, vec!["order-42".to_string()]);

    let other = StartRequest {
        user_id: "someone-else".into(),
        ..request.clone()
    };
    assert!(matches!(
        intake.start(&other).await,
        Err(Error::KeyInUse { .. })
    ));
    let missing = StartRequest {
        idempotency_key: "order-43".into(),
        version: 7,
        ..request
    };
    assert!(matches!(
        intake.start(&missing).await,
        Err(Error::WorkflowNotFound { version: 7, .. })
    ));
}

/// Bug: a status message that can never succeed (NUL in a field, which PostgreSQL refuses)
/// was redelivered forever; 1,000 of them filled the consumer's `max_ack_pending` and then
/// no report was processed at all. Now every such message is terminated at once, so the
/// stream drains and a valid report behind 1,050 of them is applied.
#[tokio::test]
async fn status_messages_that_can_never_succeed_leave_the_stream() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = enqueued_run(&pool).await;
    let intake = spawn_status_intake(&pool, &launcher).await;
    for n in 0..1_050u64 {
        // NUL in a field (for the real run and for unknown ones), an unknown run, a key that
        // does not match its subject, a body that is not JSON.
        let (subject_key, body) = match n % 5 {
            0 => (
                key(1),
                json!({"idempotency_key": key(1), "status": "FAILED", "error": "a\u{0}"}),
            ),
            1 => (
                key(n + 10),
                json!({"idempotency_key": key(n + 10), "status": "FAILED",
                   "executor_id": "e\u{0}"}),
            ),
            2 => (
                key(n + 10),
                json!({"idempotency_key": key(n + 10), "status": "SUCCESS"}),
            ),
            3 => (
                key(1),
                json!({"idempotency_key": key(2), "status": "SUCCESS"}),
            ),
            _ => (key(1), json!("not an object")),
        };
        publish_status(&launcher, "kairos", &subject_key, &body)
            .await
            .expect("publish poison");
    }
    let valid = json!({"idempotency_key": key(1), "status": "SUCCESS", "executor_id": "e1"});
    publish_status(&launcher, "kairos", &key(1), &valid)
        .await
        .expect("publish valid report");
    until(
        Duration::from_secs(30),
        "the valid report is applied",
        || async { status_of(&pool, 1).await == RunStatus::Success },
    )
    .await;
    // Every poison message left the stream, except the reports about unknown runs: those are
    // sent again later for a while (a failover may have lost a run the executor did get; see
    // `lost_tail.rs`), 210 of them, one per fifth message.
    let unknown: std::collections::BTreeSet<String> = (0..1_050u64)
        .filter(|n| n % 5 == 2)
        .map(|n| format!("kairos.status.{}", key(n + 10)))
        .collect();
    until(
        Duration::from_secs(10),
        "status stream holds only the reports about unknown runs",
        || async {
            let left: std::collections::BTreeSet<String> = read_stream(&launcher, STATUS_STREAM)
                .await
                .expect("read")
                .into_iter()
                .map(|stored| stored.subject)
                .collect();
            left == unknown
        },
    )
    .await;
    assert_eq!(
        field(&pool, &key(1), "last_error").await,
        None,
        "no refused report changed the run"
    );
    intake.end().await;
}
