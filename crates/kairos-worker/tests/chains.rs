//! Chained triggers on real PostgreSQL and nats-server: a child `@after A` gets one run per
//! final outcome of A's runs that it waits for (launched at once, keyed on the parent run so
//! repeated reports create nothing new), none after an outcome it does not wait for or a
//! failure that will be retried, none while paused, none once its parent is deleted.

use crate::dispatcher_support;

use std::sync::Arc;
use std::time::Duration;

use dispatcher_support::{config, drain, key, nats, run, stream_ids, until, workflow};
use kairos_core::{Run, RunSource, RunStatus};
use kairos_registrar::{Registrar, ScheduleInput, Settings};
use kairos_store::runs;
use kairos_store::PgPool;
use kairos_testkit::{sqlx, TestDb};
use kairos_worker::dispatcher::Dispatcher;
use kairos_worker::intake::StatusReport;
use kairos_worker::intake::{parse_report, Intake};
use serde_json::json;
use sha2::{Digest, Sha256};

fn registrar(pool: &PgPool) -> Registrar {
    Registrar::new(pool.clone(), Settings::default())
}

/// A schedule of `wf` v1 with `cron_expr` (the parent ticks once a year: its runs here are
/// written by the test).
fn input(schedule_id: &str, cron_expr: &str) -> ScheduleInput {
    ScheduleInput {
        schedule_id: Some(schedule_id.into()),
        workflow_id: "wf".into(),
        version: 1,
        user_id: "u".into(),
        cron_expr: cron_expr.into(),
        timezone: "UTC".into(),
        ..ScheduleInput::default()
    }
}

/// The key of the child run that `parent_key` fires.
fn child_key(child: &str, parent_key: &str) -> String {
    hex::encode(Sha256::digest(format!("{child}:{parent_key}")))
}

async fn report(intake: &Intake, key: &str, body: serde_json::Value) {
    let report: StatusReport = parse_report(key, &body).expect("a valid report");
    intake.report(key, &report).await.expect("recorded");
}

async fn runs_of(pool: &PgPool, schedule_id: &str) -> Vec<Run> {
    runs::list_for_schedule(pool, schedule_id, None, None, 1000)
        .await
        .expect("runs")
}

/// Publishes parent run `key` (of schedule `a`) through the dispatcher.
async fn launch(pool: &PgPool, dispatcher: &Dispatcher<kairos_launcher::NatsLauncher>, key: &str) {
    run(pool, key, "a", -0.1).await;
    drain(dispatcher).await;
    let run = runs::get(pool, key).await.expect("read").expect("run");
    assert_eq!(
        run.status,
        RunStatus::Enqueued,
        "the parent run is published"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_on_success_runs_once_per_successful_parent_run_and_never_after_a_failure() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    let registrar = registrar(&pool);
    registrar.upsert(&input("a", "0 0 1 1 *")).await.expect("a");
    let b = registrar
        .upsert(&input("b", "@after a on success"))
        .await
        .expect("b")
        .schedule;
    assert_eq!(b.next_run_at, None, "a chained schedule has no ticks");
    let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), config());
    let intake = Intake::new(pool.clone());

    let ok = key(1);
    launch(&pool, &dispatcher, &ok).await;
    let success = json!({"status": "SUCCESS", "executor_id": "e1"});
    report(&intake, &ok, success.clone()).await;
    let children = runs_of(&pool, "b").await;
    assert_eq!(children.len(), 1, "one child run per successful parent run");
    let child = &children[0];
    assert_eq!(child.idempotency_key, child_key("b", &ok));
    assert_eq!(child.source, RunSource::Chain);
    assert_eq!(child.parent_key.as_deref(), Some(ok.as_str()));
    assert_eq!(child.status, RunStatus::Pending);
    // It is due at once: the next dispatcher round publishes it.
    drain(&dispatcher).await;
    let child_now = runs::get(&pool, &child.idempotency_key)
        .await
        .expect("read")
        .expect("child");
    assert_eq!(child_now.status, RunStatus::Enqueued);
    assert!(stream_ids(&launcher).await.contains(&child.idempotency_key));

    // 50 repeated SUCCESS callbacks create nothing new.
    for _ in 0..50 {
        report(&intake, &ok, success.clone()).await;
    }
    assert_eq!(runs_of(&pool, "b").await.len(), 1);

    // A failed parent run (no retry policy: final at once) fires nothing.
    let failed = key(2);
    launch(&pool, &dispatcher, &failed).await;
    report(
        &intake,
        &failed,
        json!({"status": "FAILED", "executor_id": "e1", "error": "boom"}),
    )
    .await;
    let parent = runs::get(&pool, &failed).await.expect("read").expect("run");
    assert!(parent.dead_lettered_at.is_some(), "the failure is final");
    assert_eq!(
        runs_of(&pool, "b").await.len(),
        1,
        "no child after a failure"
    );

    // A second success fires a second child run.
    let ok2 = key(3);
    launch(&pool, &dispatcher, &ok2).await;
    report(&intake, &ok2, success).await;
    let keys: Vec<String> = runs_of(&pool, "b")
        .await
        .into_iter()
        .map(|r| r.idempotency_key)
        .collect();
    assert_eq!(keys.len(), 2);
    assert!(keys.contains(&child_key("b", &ok2)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_on_failure_fires_only_after_the_final_failure() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    let registrar = registrar(&pool);
    let mut parent = input("a", "0 0 1 1 *");
    parent.max_attempts = Some(2);
    parent.retry_intervals_s = Some(vec![1]);
    registrar.upsert(&parent).await.expect("a");
    registrar
        .upsert(&input("on-fail", "@after a on failure"))
        .await
        .expect("child");
    registrar
        .upsert(&input("on-any", "@after a on always"))
        .await
        .expect("child");
    let dispatcher = Arc::new(Dispatcher::new(pool.clone(), launcher.clone(), config()));
    let intake = Intake::new(pool.clone());

    let k = key(1);
    launch(&pool, &dispatcher, &k).await;
    let failure = |attempt: u32| json!({"status": "FAILED", "attempt": attempt, "executor_id": "e1", "error": "boom"});
    report(&intake, &k, failure(1)).await;
    let retrying = runs::get(&pool, &k).await.expect("read").expect("run");
    assert_eq!(retrying.status, RunStatus::Retrying);
    assert!(
        runs_of(&pool, "on-fail").await.is_empty(),
        "a retried failure is not final"
    );
    assert!(runs_of(&pool, "on-any").await.is_empty());

    until(
        Duration::from_secs(10),
        "attempt 2 is published",
        || async {
            drain(&dispatcher).await;
            let run = runs::get(&pool, &k).await.expect("read").expect("run");
            (run.status, run.attempt) == (RunStatus::Enqueued, 2)
        },
    )
    .await;
    report(&intake, &k, failure(2)).await;
    let on_fail = runs_of(&pool, "on-fail").await;
    assert_eq!(on_fail.len(), 1, "the final failure fires the child");
    assert_eq!(on_fail[0].parent_key.as_deref(), Some(k.as_str()));
    assert_eq!(
        runs_of(&pool, "on-any").await.len(),
        1,
        "always includes failure"
    );

    // A success fires `always` but not `on failure`.
    let ok = key(2);
    launch(&pool, &dispatcher, &ok).await;
    report(
        &intake,
        &ok,
        json!({"status": "SUCCESS", "executor_id": "e1"}),
    )
    .await;
    assert_eq!(runs_of(&pool, "on-fail").await.len(), 1);
    assert_eq!(runs_of(&pool, "on-any").await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_child_or_a_deleted_parent_fires_nothing_and_get_says_why() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    let registrar = registrar(&pool);
    registrar.upsert(&input("a", "0 0 1 1 *")).await.expect("a");
    registrar.upsert(&input("b", "@after a")).await.expect("b");
    let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), config());
    let intake = Intake::new(pool.clone());
    let success = json!({"status": "SUCCESS", "executor_id": "e1"});

    registrar.set_paused("b", true).await.expect("pause");
    let k1 = key(1);
    launch(&pool, &dispatcher, &k1).await;
    report(&intake, &k1, success.clone()).await;
    assert!(
        runs_of(&pool, "b").await.is_empty(),
        "a paused child does not fire"
    );
    registrar.set_paused("b", false).await.expect("resume");

    // The parent is deleted while one of its runs is in flight.
    let k2 = key(2);
    launch(&pool, &dispatcher, &k2).await;
    assert_eq!(registrar.get("b").await.expect("get").waiting_on, None);
    registrar.delete("a").await.expect("delete a");
    report(&intake, &k2, success).await;
    assert!(
        runs_of(&pool, "b").await.is_empty(),
        "a deleted parent fires nothing"
    );
    let view = registrar.get("b").await.expect("get b");
    let why = view.waiting_on.expect("GET says why b waits");
    assert!(
        why.contains("parent schedule \"a\" does not exist"),
        "{why}"
    );
    assert_eq!(view.schedule.next_run_at, None);
    let (n,): (i64,) = sqlx::query_as("select count(*) from schedule_runs where source = 'chain'")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(n, 0);
}
