//! After a failover that lost the primary's last commits (asynchronous replication), an
//! executor's report can arrive about a run the new primary does not show published, or
//! does not have at all, although the executor did receive its launch: the run is planned
//! and published again under its key, and the stream drops the copy. Over NATS such a
//! report is sent again later instead of refused, and applies once the run is published
//! again; past `UNPUBLISHED_DELIVERIES` deliveries it is refused as before. (The other half,
//! acknowledging a batch only once a standby has it, is exercised through a real failover
//! by the failover chaos run, `scripts/chaos --ha-ci`.) Real PostgreSQL and nats-server.

use crate::dispatcher_support;

use kairos_testkit::sqlx;
use kairos_testkit::TestDb;

use dispatcher_support::{config, drain, key, nats, run, schedule, statuses, workflow};
use kairos_core::RunStatus;
use kairos_launcher::status::{Disposition, StatusMessage};
use kairos_store::replication;
use kairos_worker::dispatcher::Dispatcher;
use kairos_worker::intake::{Intake, UNPUBLISHED_DELIVERIES};

/// A status message as the stream delivers it the `deliveries`-th time.
fn event(key: &str, status: &str, deliveries: i64) -> StatusMessage {
    let body = serde_json::json!({"idempotency_key": key, "status": status,
        "executor_id": "exec-1"});
    StatusMessage {
        subject: format!("kairos.status.{key}"),
        key: key.to_string(),
        payload: body.to_string().into_bytes(),
        traceparent: None,
        deliveries,
    }
}

#[tokio::test]
async fn a_report_about_a_run_not_published_here_waits_for_its_publish_then_applies() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "s", "allow", None).await;
    // Planned, not yet due: not published (a due PENDING run takes reports, its publish may
    // be in flight).
    run(&pool, &key(1), "s", 30.0).await;
    let intake = Intake::new(pool.clone());

    let early = intake
        .take_messages(vec![event(&key(1), "STARTED", 1)])
        .await;
    assert_eq!(early, vec![Disposition::Later]);
    assert_eq!(statuses(&pool).await[&key(1)], RunStatus::Pending);

    sqlx::query("update schedule_runs set fire_at = now() - interval '1 s'")
        .execute(&pool)
        .await
        .expect("make the run due");
    let dispatcher = Dispatcher::new(pool.clone(), launcher, config());
    let _ = drain(&dispatcher).await;
    assert_eq!(statuses(&pool).await[&key(1)], RunStatus::Enqueued);
    let again = intake
        .take_messages(vec![event(&key(1), "STARTED", 2)])
        .await;
    assert_eq!(again, vec![Disposition::Done]);
    assert_eq!(statuses(&pool).await[&key(1)], RunStatus::Started);
}

#[tokio::test]
async fn a_report_about_an_unknown_run_is_sent_again_for_a_while_then_refused() {
    let db = TestDb::new().await;
    let intake = Intake::new(db.pool());
    for deliveries in [1, UNPUBLISHED_DELIVERIES - 1] {
        let answer = intake
            .take_messages(vec![event("no-such-run", "SUCCESS", deliveries)])
            .await;
        assert_eq!(answer, vec![Disposition::Later], "delivery {deliveries}");
    }
    let last = intake
        .take_messages(vec![event(
            "no-such-run",
            "SUCCESS",
            UNPUBLISHED_DELIVERIES,
        )])
        .await;
    assert_eq!(last, vec![Disposition::Refuse]);
    // A report that breaks a rule is refused at once, whatever its delivery.
    let broken = intake
        .take_messages(vec![event("no-such-run", "DONE", 1)])
        .await;
    assert_eq!(broken, vec![Disposition::Refuse]);
}

#[tokio::test]
async fn without_a_standby_a_commit_waits_for_nothing() {
    let db = TestDb::new().await;
    let written = replication::written(&db.pool()).await.expect("written");
    assert_eq!(written.standbys, 0, "the test server streams to no standby");
    assert!(written.lsn.contains('/'), "an LSN: {}", written.lsn);
    let flushed = replication::flushed(&db.pool(), &written.lsn)
        .await
        .expect("flushed");
    assert_eq!(flushed, None, "no standby: nothing to wait for");
}
