//! Operator cancel on real PostgreSQL and nats-server: an unpublished run is cancelled at
//! once and never published; a published one becomes CANCELLING, its executor gets a cancel
//! message on `kairos.cancel.<workflow_id>` and its CANCELLED report ends it, or the cancel
//! times out; concurrent cancels make one transition; a cancel racing a SUCCESS ends in the
//! state recorded first; a cancelled run is never retried; a cancel asked for while NATS is
//! down goes out once it is back.

use crate::dispatcher_support;

use std::sync::Arc;
use std::time::Duration;

use dispatcher_support::{
    config, field, key, nats, run, schedule, spawn_dispatcher, stream_ids, until, workflow,
};
use kairos_core::RunStatus;
use kairos_launcher::status::read_stream;
use kairos_launcher::NatsLauncher;
use kairos_store::cancel::Cancel;
use kairos_store::{runs, PgPool};
use kairos_testkit::{sqlx, TestDb};
use kairos_worker::dispatcher::Dispatcher;
use kairos_worker::intake::{parse_report, Intake};
use kairos_worker::sweep::{SweepConfig, Sweeper};
use serde_json::{json, Value};

/// An intake whose cancels are published at once by `dispatcher`.
fn intake(pool: &PgPool, dispatcher: &Arc<Dispatcher<NatsLauncher>>) -> Intake {
    let intake = Intake::new(pool.clone());
    intake.attach(dispatcher.clone());
    intake
}

async fn say(intake: &Intake, key: &str, body: Value) -> kairos_worker::intake::Applied {
    let report = parse_report(key, &body).expect("a valid report");
    intake.report(key, &report).await.expect("recorded")
}

async fn status(pool: &PgPool, key: &str) -> RunStatus {
    runs::get(pool, key)
        .await
        .expect("read")
        .expect("run exists")
        .status
}

/// The cancel messages in stream KAIROS_CANCEL: (subject, msg id, body).
async fn cancels(launcher: &NatsLauncher) -> Vec<(String, String, Value)> {
    read_stream(launcher, "KAIROS_CANCEL")
        .await
        .expect("read cancel stream")
        .into_iter()
        .map(|m| {
            let body = serde_json::from_slice(&m.payload).expect("JSON body");
            (m.subject, m.msg_id.expect("a message id"), body)
        })
        .collect()
}

/// Schedule `s1` (`overlap`), one run due now, published and STARTED by executor `e1`.
async fn started_run(
    pool: &PgPool,
    dispatcher: &Dispatcher<NatsLauncher>,
    intake: &Intake,
    overlap: &str,
) -> String {
    workflow(pool).await;
    schedule(pool, "s1", overlap, None).await;
    let k = key(1);
    run(pool, &k, "s1", -1.0).await;
    dispatcher.round().await.expect("round");
    assert_eq!(status(pool, &k).await, RunStatus::Enqueued);
    say(
        intake,
        &k,
        json!({"status": "STARTED", "executor_id": "e1", "run_id": "r-1"}),
    )
    .await;
    k
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_run_is_cancelled_at_once_and_never_published() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    let dispatcher = Arc::new(Dispatcher::new(pool.clone(), launcher.clone(), config()));
    let intake = intake(&pool, &dispatcher);
    workflow(&pool).await;
    schedule(&pool, "s1", "skip", None).await;
    let (due, queued) = (key(1), key(2));
    run(&pool, &due, "s1", -1.0).await;
    run(&pool, &queued, "s1", -1.0).await;
    sqlx::query("update schedule_runs set status = 'QUEUED' where idempotency_key = $1")
        .bind(&queued)
        .execute(&pool)
        .await
        .expect("queue");

    for k in [&due, &queued] {
        let done = intake.cancel(k, Some("not needed")).await.expect("cancel");
        assert!(matches!(done, Cancel::Cancelled(_)), "{done:?}");
        let run = runs::get(&pool, k).await.expect("read").expect("run");
        assert_eq!(run.status, RunStatus::Cancelled);
        assert_eq!(
            run.reason.as_deref(),
            Some("cancelled by an operator: not needed")
        );
    }
    dispatcher_support::drain(&dispatcher).await;
    dispatcher_support::sweeper(&pool, dispatcher.launcher())
        .sweep()
        .await
        .expect("sweep");
    assert!(stream_ids(&launcher).await.is_empty(), "nothing published");
    assert!(cancels(&launcher).await.is_empty(), "no cancel message");
    assert_eq!(status(&pool, &due).await, RunStatus::Cancelled);
    assert!(matches!(
        intake.cancel(&key(9), None).await.expect("cancel"),
        Cancel::NotFound
    ));
    // A resume or reschedule brings back never-published CANCELLED runs, but not one an
    // operator cancelled.
    let long_ago = chrono::Utc::now() - chrono::Duration::days(1);
    let planned = runs::future_planned(&pool, &["s1".to_string()], long_ago)
        .await
        .expect("planned");
    assert!(planned.is_empty(), "{planned:?}");
    let now = chrono::Utc::now();
    let kept = runs::keep_planned(&pool, std::slice::from_ref(&due), &[now], now)
        .await
        .expect("keep");
    assert_eq!(kept, 0);
    assert_eq!(status(&pool, &due).await, RunStatus::Cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_started_run_is_told_to_stop_and_ends_on_the_executors_report() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    let dispatcher = Arc::new(Dispatcher::new(pool.clone(), launcher.clone(), config()));
    let intake = intake(&pool, &dispatcher);
    let k = started_run(&pool, &dispatcher, &intake, "skip").await;

    let done = intake
        .cancel(&k, Some("wrong input"))
        .await
        .expect("cancel");
    assert!(matches!(done, Cancel::Cancelling(_)), "{done:?}");
    assert_eq!(status(&pool, &k).await, RunStatus::Cancelling);
    let sent = cancels(&launcher).await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    let (subject, msg_id, body) = &sent[0];
    assert_eq!(subject, "kairos.cancel.wf");
    assert_eq!(msg_id, &format!("{k}:cancel:1"));
    assert_eq!(
        body,
        &json!({"idempotency_key": k, "run_id": "r-1", "attempt": 1,
                "reason": "cancelled by an operator: wrong input"})
    );
    assert!(field(&pool, &k, "cancel_sent_at").await.is_some());
    // A heartbeat or a late STARTED while cancelling changes nothing.
    say(
        &intake,
        &k,
        json!({"status": "STARTED", "executor_id": "e1"}),
    )
    .await;
    assert_eq!(status(&pool, &k).await, RunStatus::Cancelling);

    say(
        &intake,
        &k,
        json!({"status": "CANCELLED", "executor_id": "e1"}),
    )
    .await;
    let run = runs::get(&pool, &k).await.expect("read").expect("run");
    assert_eq!(run.status, RunStatus::Cancelled);
    assert!(run.finished_at.is_some());
    // Status only moves forward: nothing after the confirmation changes it.
    say(
        &intake,
        &k,
        json!({"status": "SUCCESS", "executor_id": "e1"}),
    )
    .await;
    assert_eq!(status(&pool, &k).await, RunStatus::Cancelled);
    dispatcher_support::sweeper(&pool, dispatcher.launcher())
        .sweep()
        .await
        .expect("sweep");
    assert_eq!(cancels(&launcher).await.len(), 1, "sent once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconfirmed_cancel_times_out_into_cancelled() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    let dispatcher = Arc::new(Dispatcher::new(pool.clone(), launcher.clone(), config()));
    let settings = SweepConfig {
        cancel_timeout: Duration::from_millis(300),
        ..dispatcher_support::sweep_config()
    };
    let sweeper = || Sweeper::new(pool.clone(), launcher.clone(), settings.clone());
    let intake = intake(&pool, &dispatcher);
    let k = started_run(&pool, &dispatcher, &intake, "skip").await;
    let done = intake.cancel(&k, None).await.expect("cancel");
    assert!(matches!(done, Cancel::Cancelling(_)));
    // Within the timeout the sweep leaves it alone.
    sweeper().sweep().await.expect("sweep");
    assert_eq!(status(&pool, &k).await, RunStatus::Cancelling);

    let looping = spawn_dispatcher(dispatcher.clone(), sweeper());
    until(Duration::from_secs(10), "the cancel times out", || async {
        status(&pool, &k).await == RunStatus::Cancelled
    })
    .await;
    looping.end().await;
    let reason = field(&pool, &k, "reason").await.expect("a reason");
    assert!(reason.contains("did not confirm"), "{reason}");
    // It no longer holds its schedule: the next tick launches.
    run(&pool, &key(2), "s1", -1.0).await;
    dispatcher.round().await.expect("round");
    assert_eq!(status(&pool, &key(2)).await, RunStatus::Enqueued);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_cancels_make_one_transition() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    let dispatcher = Arc::new(Dispatcher::new(pool.clone(), launcher.clone(), config()));
    let intake = intake(&pool, &dispatcher);
    let k = started_run(&pool, &dispatcher, &intake, "skip").await;
    let calls = (0..20).map(|n| {
        let intake = intake.clone();
        let k = k.clone();
        tokio::spawn(async move { intake.cancel(&k, Some(&format!("caller {n}"))).await })
    });
    let calls: Vec<_> = calls.collect();
    let mut answers: Vec<Cancel> = Vec::new();
    for call in calls {
        answers.push(call.await.expect("join").expect("cancel"));
    }
    let moved: Vec<&Cancel> = answers
        .iter()
        .filter(|a| matches!(a, Cancel::Cancelling(_)))
        .collect();
    assert_eq!(moved.len(), 1, "{answers:?}");
    assert!(answers
        .iter()
        .all(|a| matches!(a, Cancel::Cancelling(_) | Cancel::AlreadyCancelling(_))));
    // The row was written once: its reason is the winner's and the stream has one message.
    let Cancel::Cancelling(winner) = moved[0] else {
        unreachable!()
    };
    let run = runs::get(&pool, &k).await.expect("read").expect("run");
    assert_eq!(run.reason, winner.reason);
    assert_eq!(run.updated_at, winner.updated_at);
    dispatcher_support::sweeper(&pool, dispatcher.launcher())
        .sweep()
        .await
        .expect("sweep");
    assert_eq!(cancels(&launcher).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_racing_a_success_ends_in_the_state_recorded_first() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    let dispatcher = Arc::new(Dispatcher::new(pool.clone(), launcher.clone(), config()));
    let intake = intake(&pool, &dispatcher);
    workflow(&pool).await;
    schedule(&pool, "s1", "allow", None).await;
    for n in 1..=10 {
        let k = key(n);
        run(&pool, &k, "s1", -1.0).await;
        dispatcher.round().await.expect("round");
        say(
            &intake,
            &k,
            json!({"status": "STARTED", "executor_id": "e1"}),
        )
        .await;
        let (cancel, success) = tokio::join!(
            intake.cancel(&k, None),
            say(
                &intake,
                &k,
                json!({"status": "SUCCESS", "executor_id": "e1"})
            )
        );
        let cancel = cancel.expect("cancel");
        let run = runs::get(&pool, &k).await.expect("read").expect("run");
        // The executor's SUCCESS is the first terminal state either way: a cancel after it
        // finds the run finished; a SUCCESS after the cancel (still CANCELLING, not final)
        // is recorded as the truth.
        assert_eq!(run.status, RunStatus::Success, "{cancel:?} {success:?}");
        match cancel {
            Cancel::Finished(seen) => assert_eq!(seen.status, RunStatus::Success),
            Cancel::Cancelling(seen) => assert_eq!(seen.status, RunStatus::Cancelling),
            other => panic!("unexpected {other:?}"),
        }
    }
    // Afterwards a cancel changes nothing and says the run had finished.
    let done = intake.cancel(&key(1), None).await.expect("cancel");
    assert!(matches!(&done, Cancel::Finished(run) if run.status == RunStatus::Success));
    assert_eq!(done.kind(), "already_finished");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_is_never_retried() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    let dispatcher = Arc::new(Dispatcher::new(pool.clone(), launcher.clone(), config()));
    let intake = intake(&pool, &dispatcher);
    let k = started_run(&pool, &dispatcher, &intake, "allow").await;
    sqlx::query("update schedules set max_attempts = 3, retry_intervals_s = '{1}'")
        .execute(&pool)
        .await
        .expect("retry policy");

    // A FAILED report after the cancel: FAILED for good, no next attempt.
    intake.cancel(&k, None).await.expect("cancel");
    say(
        &intake,
        &k,
        json!({"status": "FAILED", "executor_id": "e1", "error": "killed"}),
    )
    .await;
    let row = runs::get(&pool, &k).await.expect("read").expect("run");
    assert_eq!((row.status, row.attempt), (RunStatus::Failed, 1));
    let reason = row.reason.expect("a reason");
    assert!(
        reason.starts_with("executor reported FAILED before it stopped"),
        "{reason}"
    );
    assert!(row.dead_lettered_at.is_none());

    // A run waiting for its next attempt is cancelled at once and never launched again.
    let k2 = key(2);
    run(&pool, &k2, "s1", -1.0).await;
    dispatcher.round().await.expect("round");
    say(
        &intake,
        &k2,
        json!({"status": "FAILED", "executor_id": "e1"}),
    )
    .await;
    assert_eq!(status(&pool, &k2).await, RunStatus::Retrying);
    let done = intake.cancel(&k2, None).await.expect("cancel");
    assert!(matches!(done, Cancel::Cancelled(_)), "{done:?}");
    // Its next attempt's time has come: had the cancel not held, it would be claimed now.
    sqlx::query(
        "update schedule_runs set fire_at = now() - interval '1 second' \
                 where idempotency_key = $1",
    )
    .bind(&k2)
    .execute(&pool)
    .await
    .expect("make it due");
    dispatcher_support::drain(&dispatcher).await;
    dispatcher_support::sweeper(&pool, dispatcher.launcher())
        .sweep()
        .await
        .expect("sweep");
    let row = runs::get(&pool, &k2).await.expect("read").expect("run");
    assert_eq!((row.status, row.attempt), (RunStatus::Cancelled, 2));
    assert!(
        !stream_ids(&launcher).await.contains(&format!("{k2}:2")),
        "attempt 2 never published"
    );
    // A confirmed cancel is never retried either (the CANCELLED report is final).
    let k3 = key(3);
    run(&pool, &k3, "s1", -1.0).await;
    dispatcher.round().await.expect("round");
    intake.cancel(&k3, None).await.expect("cancel");
    say(
        &intake,
        &k3,
        json!({"status": "CANCELLED", "executor_id": "e1"}),
    )
    .await;
    assert_eq!(status(&pool, &k3).await, RunStatus::Cancelled);
    assert_eq!(field(&pool, &k3, "attempt").await.as_deref(), Some("1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_asked_for_while_nats_is_down_goes_out_when_it_is_back() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (mut server, launcher) = nats().await;
    let dispatcher = Arc::new(Dispatcher::new(pool.clone(), launcher.clone(), config()));
    let intake = intake(&pool, &dispatcher);
    let k = started_run(&pool, &dispatcher, &intake, "skip").await;
    server.stop();
    let done = intake.cancel(&k, None).await.expect("cancel is recorded");
    assert!(matches!(done, Cancel::Cancelling(_)));
    assert!(field(&pool, &k, "cancel_sent_at").await.is_none());
    server.restart();
    let looping = spawn_dispatcher(
        dispatcher.clone(),
        dispatcher_support::sweeper(&pool, &launcher),
    );
    until(
        Duration::from_secs(30),
        "the sweep sends the cancel",
        || async { field(&pool, &k, "cancel_sent_at").await.is_some() },
    )
    .await;
    looping.end().await;
    let sent = cancels(&launcher).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].2["idempotency_key"], json!(k));
}
