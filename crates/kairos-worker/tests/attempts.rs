//! Failure handling on real PostgreSQL and nats-server: a failed attempt is retried under
//! the same key (`Nats-Msg-Id` `key:n`) after its schedule's intervals, the last failure
//! dead-letters the run (listed, copied once to `KAIROS_DLQ`), an operator's retry starts
//! one more attempt, heartbeats keep a long run alive while silence times it out and
//! retries it, and priorities order a backlog.

use crate::dispatcher_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use dispatcher_support::{
    config, key, nats, run, schedule, spawn_dispatcher, stream_ids, until, workflow,
};
use kairos_core::RunStatus;
use kairos_launcher::status::read_stream;
use kairos_registrar::{DeadLetterQuery, Registrar, Settings};
use kairos_store::{runs, PgPool};
use kairos_testkit::{sqlx, TestDb};
use kairos_worker::dispatcher::Dispatcher;
use kairos_worker::intake::{parse_report, Intake};
use kairos_worker::intake::{Applied, StatusReport};
use kairos_worker::sweep::{SweepConfig, Sweeper};
use serde_json::json;

async fn status_of(pool: &PgPool, key: &str) -> (RunStatus, i32) {
    let run = runs::get(pool, key).await.expect("read").expect("run");
    (run.status, run.attempt)
}

async fn report(intake: &Intake, key: &str, body: serde_json::Value) -> Applied {
    let report: StatusReport = parse_report(key, &body).expect("a valid report");
    intake.report(key, &report).await.expect("recorded")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_attempts_retry_after_their_intervals_then_dead_letter_then_retry_on_request() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "r", "skip", None).await;
    sqlx::query(
        "update schedules set max_attempts = 3, retry_intervals_s = '{1,2}' \
         where schedule_id = 'r'",
    )
    .execute(&pool)
    .await
    .expect("retry policy");
    let k = key(1);
    run(&pool, &k, "r", -0.1).await;
    let dispatcher = Arc::new(Dispatcher::new(pool.clone(), launcher.clone(), config()));
    let looping = spawn_dispatcher(dispatcher, dispatcher_support::sweeper(&pool, &launcher));
    let intake = Intake::new(pool.clone());

    let mut failed_at = Vec::new();
    let mut launched_after = Vec::new();
    for attempt in 1..=3 {
        until(
            Duration::from_secs(10),
            "the attempt is published",
            || async { status_of(&pool, &k).await == (RunStatus::Enqueued, attempt) },
        )
        .await;
        if let Some(at) = failed_at.last() {
            launched_after.push(Instant::now().duration_since(*at));
        }
        let body = json!({"status": "FAILED", "attempt": attempt, "executor_id": "e1",
            "error": format!("boom {attempt}")});
        // Taken before the report: the retry is timed from the failure the report records,
        // which a slow report (a loaded machine) would otherwise put before this instant.
        failed_at.push(Instant::now());
        report(&intake, &k, body).await;
    }
    let run = runs::get(&pool, &k).await.expect("read").expect("run");
    assert_eq!((run.status, run.attempt), (RunStatus::Failed, 3));
    assert!(
        run.dead_lettered_at.is_some(),
        "the last failure dead-letters"
    );
    // Attempt 2 waited its 1 s, attempt 3 its 2 s (and neither much longer).
    assert!(
        launched_after[0] >= Duration::from_millis(900)
            && launched_after[0] < Duration::from_millis(2_500),
        "{launched_after:?}"
    );
    assert!(
        launched_after[1] >= Duration::from_millis(1_900)
            && launched_after[1] < Duration::from_millis(3_500),
        "{launched_after:?}"
    );
    let registrar = Registrar::new(pool.clone(), Settings::default());
    let listed = registrar
        .dead_letters(&DeadLetterQuery {
            schedule_id: Some("r".into()),
            limit: 10,
            ..DeadLetterQuery::default()
        })
        .await
        .expect("list");
    assert_eq!(listed.runs.len(), 1);
    until(
        Duration::from_secs(10),
        "one copy in KAIROS_DLQ",
        || async {
            read_stream(&launcher, "KAIROS_DLQ")
                .await
                .expect("read")
                .len()
                == 1
        },
    )
    .await;
    let letter = &read_stream(&launcher, "KAIROS_DLQ").await.expect("read")[0];
    assert_eq!(
        letter.msg_id.as_deref(),
        Some(format!("{k}:dlq:3").as_str())
    );
    let body: serde_json::Value = serde_json::from_slice(&letter.payload).expect("json");
    assert_eq!(
        (body["attempts"].clone(), body["last_error"].clone()),
        (json!(3), json!("boom 3"))
    );

    let (retried, started) = registrar.retry(&k, "req-1").await.expect("retry");
    assert!(started);
    assert_eq!((retried.status, retried.attempt), (RunStatus::Retrying, 4));
    let (_, again) = registrar.retry(&k, "req-1").await.expect("same request");
    assert!(!again, "the same request id starts no second attempt");
    until(
        Duration::from_secs(10),
        "attempt 4 is published",
        || async { status_of(&pool, &k).await == (RunStatus::Enqueued, 4) },
    )
    .await;
    looping.end().await;
    assert_eq!(
        stream_ids(&launcher).await,
        vec![
            k.clone(),
            format!("{k}:2"),
            format!("{k}:3"),
            format!("{k}:4")
        ]
    );
    let history = registrar.run(&k).await.expect("run view").history;
    let errors: Vec<_> = history
        .iter()
        .map(|a| (a.attempt, a.status, a.error.clone()))
        .collect();
    assert_eq!(
        errors,
        (1..=3)
            .map(|n| (n, RunStatus::Failed, Some(format!("boom {n}"))))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        read_stream(&launcher, "KAIROS_DLQ")
            .await
            .expect("read")
            .len(),
        1,
        "a dead letter is copied once"
    );
}

#[tokio::test]
async fn a_late_report_about_an_earlier_attempt_changes_nothing_and_retryable_false_dead_letters() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "r", "skip", None).await;
    sqlx::query("update schedules set max_attempts = 5 where schedule_id = 'r'")
        .execute(&pool)
        .await
        .expect("retry policy");
    let k = key(1);
    run(&pool, &k, "r", -0.1).await;
    let dispatcher = Dispatcher::new(pool.clone(), launcher, config());
    dispatcher.round().await.expect("attempt 1");
    let intake = Intake::new(pool.clone());
    report(&intake, &k, json!({"status": "FAILED", "attempt": 1})).await;
    assert_eq!(
        status_of(&pool, &k).await,
        (RunStatus::Retrying, 2),
        "no wait: at once"
    );
    dispatcher.round().await.expect("attempt 2");
    assert_eq!(status_of(&pool, &k).await, (RunStatus::Enqueued, 2));
    let late = report(&intake, &k, json!({"status": "SUCCESS", "attempt": 1})).await;
    assert!(matches!(late, Applied::Unchanged(_)), "{late:?}");
    assert_eq!(status_of(&pool, &k).await, (RunStatus::Enqueued, 2));
    report(
        &intake,
        &k,
        json!({"status": "FAILED", "attempt": 2, "retryable": false}),
    )
    .await;
    let run = runs::get(&pool, &k).await.expect("read").expect("run");
    assert_eq!((run.status, run.attempt), (RunStatus::Failed, 2));
    assert!(
        run.dead_lettered_at.is_some(),
        "retryable: false dead-letters at once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silence_times_a_started_run_out_and_retries_it_while_heartbeats_keep_one_alive() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    for id in ["quiet", "beating"] {
        schedule(&pool, id, "skip", None).await;
    }
    sqlx::query(
        "update schedules set heartbeat_timeout_s = 3, max_attempts = 2, \
           retry_intervals_s = '{60}'",
    )
    .execute(&pool)
    .await
    .expect("heartbeat policy");
    let (quiet, beating) = (key(1), key(2));
    run(&pool, &quiet, "quiet", -0.1).await;
    run(&pool, &beating, "beating", -0.1).await;
    let every = SweepConfig {
        every: Duration::from_millis(200),
        ..SweepConfig::default()
    };
    let sweeper = Sweeper::new(pool.clone(), launcher.clone(), every);
    let dispatcher = Arc::new(Dispatcher::new(pool.clone(), launcher, config()));
    let looping = spawn_dispatcher(dispatcher, sweeper);
    let intake = Intake::new(pool.clone());
    for k in [&quiet, &beating] {
        until(Duration::from_secs(10), "published", || async {
            status_of(&pool, k).await.0 == RunStatus::Enqueued
        })
        .await;
        report(
            &intake,
            k,
            json!({"status": "STARTED", "executor_id": "e1"}),
        )
        .await;
    }
    let started = Instant::now();
    let mut quiet_timed_out = None;
    while started.elapsed() < Duration::from_secs(10) {
        let beat = report(
            &intake,
            &beating,
            json!({"status": "HEARTBEAT", "executor_id": "e1"}),
        );
        assert!(matches!(beat.await, Applied::Moved(_)));
        if quiet_timed_out.is_none() && status_of(&pool, &quiet).await.0 == RunStatus::Retrying {
            quiet_timed_out = Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    looping.end().await;
    let quiet_after = quiet_timed_out.expect("the silent run timed out and was retried");
    assert!(
        quiet_after >= Duration::from_millis(2_500) && quiet_after < Duration::from_secs(6),
        "timed out after {quiet_after:?}"
    );
    assert_eq!(status_of(&pool, &quiet).await, (RunStatus::Retrying, 2));
    let history = kairos_store::attempts::history(&pool, &quiet)
        .await
        .expect("history");
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].status, RunStatus::TimedOut);
    assert!(
        history[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("heartbeat")),
        "{history:?}"
    );
    assert_eq!(
        status_of(&pool, &beating).await,
        (RunStatus::Started, 1),
        "ten seconds of heartbeats every second kept it alive"
    );
}

#[tokio::test]
async fn a_backlog_publishes_every_high_priority_run_before_any_low_one() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "low", "allow", None).await;
    schedule(&pool, "high", "allow", None).await;
    sqlx::query("update schedules set priority = 10 where schedule_id = 'high'")
        .execute(&pool)
        .await
        .expect("priority");
    // 3,000 due runs, the low-priority ones older (they would go first by fire_at alone),
    // all inside the launch deadline.
    sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, workflow_id, \
           version, user_id) \
         select lpad(to_hex(n), 64, '0'), case when n % 2 = 0 then 'low' else 'high' end, \
           date_trunc('second', f), f, 'wf', 1, 'u' \
         from generate_series(1, 3000) as n, \
           lateral (select now() - make_interval(secs => case when n % 2 = 0 then 200 else 100 \
             end) + make_interval(secs => n / 1000.0) as f) as t",
    )
    .execute(&pool)
    .await
    .expect("backlog");
    // The claim orders by the run's copy of its schedule's priority: the registrar copies a
    // changed priority onto the runs not yet published.
    let copied = kairos_store::runs::copy_priority(&pool, &["high".into(), "low".into()])
        .await
        .expect("copy priority");
    assert_eq!(copied, 1500, "only the high schedule's runs differ");
    let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), config());
    for _ in 0..100 {
        if dispatcher.round().await.expect("round").claimed == 0 {
            break;
        }
    }
    let ids = stream_ids(&launcher).await;
    assert_eq!(ids.len(), 3000);
    let high = |id: &String| u64::from_str_radix(id, 16).expect("hex") % 2 == 1;
    let first_low = ids.iter().position(|id| !high(id)).expect("a low run");
    assert_eq!(first_low, 1500, "every high-priority run went first");
    assert!(ids[first_low..].iter().all(|id| !high(id)));
}
