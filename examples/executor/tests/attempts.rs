//! Attempts, dead letters and heartbeats end to end: kairos's real dispatcher loop and
//! status intake on PostgreSQL and nats-server drive the Rust and the Python executor. A
//! flaky job succeeds on its third attempt, a job that always fails is dead-lettered after
//! its last attempt, a fatal failure (`"retryable": false`) is dead-lettered after the
//! first, heartbeats keep a run alive past its schedule's `heartbeat_timeout_s`, and an
//! operator's cancel stops a long run, which the executor reports `CANCELLED` (never
//! retried). Each attempt's output reaches kairos's logs.
//!
//! Each scenario runs once per executor (`<scenario>::rust`, `<scenario>::python`); the
//! Python one needs `python3` with nats-py (`scripts/test` installs it).

use crate::kairos_support;

use std::time::Duration;

use kairos_core::RunStatus;
use kairos_store::{attempts, run_logs};
use kairos_support::{Executor, Kairos, Policy};
use serde_json::{json, Value};

/// Heartbeats often enough never to matter in scenarios without a heartbeat timeout.
const BEATS: Duration = Duration::from_millis(200);

/// Runs a scenario (`async fn(Executor)`) as one test per executor.
macro_rules! for_each_executor {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn rust() {
                super::$scenario(Executor::Rust).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn python() {
                super::$scenario(Executor::Python).await;
            }
        }
    )*};
}

for_each_executor!(
    flaky_job_succeeds_on_attempt_3,
    failing_job_is_dead_lettered_after_its_last_attempt,
    fatal_failure_is_dead_lettered_after_attempt_1,
    heartbeats_keep_a_run_alive_past_the_heartbeat_timeout,
    a_cancel_stops_the_run_and_the_executor_confirms_it,
);

/// `(status, attempt)` of every report but heartbeats, in the order sent.
fn steps(reports: &[Value]) -> Vec<(String, u64)> {
    reports
        .iter()
        .filter(|body| body["status"] != "HEARTBEAT")
        .map(|body| {
            let status = body["status"].as_str().expect("a status").to_string();
            (
                status,
                body["attempt"].as_u64().expect("every report has attempt"),
            )
        })
        .collect()
}

fn step(status: &str, attempt: u64) -> (String, u64) {
    (status.to_string(), attempt)
}

async fn flaky_job_succeeds_on_attempt_3(executor: Executor) {
    let kairos = Kairos::start().await;
    let dag = json!({"nodes": [
        {"id": "extract"},
        {"id": "load", "depends_on": ["extract"], "fail_until_attempt": 3}
    ]});
    let policy = Policy {
        max_attempts: 3,
        retry_intervals_s: Some(vec![1]),
        heartbeat_timeout_s: None,
    };
    let key = kairos.due_run("flaky", dag, &policy).await;
    let mut running = executor.start(&kairos, BEATS).await;

    let run = kairos.ended(&key, &mut running).await;
    assert_eq!((run.status, run.attempt), (RunStatus::Success, 3));
    assert!(run.dead_lettered_at.is_none());
    let reports = kairos.reports(&key, "SUCCESS", 3).await;
    assert_eq!(
        steps(&reports),
        [
            step("STARTED", 1),
            step("FAILED", 1),
            step("STARTED", 2),
            step("FAILED", 2),
            step("STARTED", 3),
            step("SUCCESS", 3),
        ],
        "the executor saw attempts 1, 2 and 3"
    );
    assert!(reports
        .iter()
        .all(|body| body["executor_id"] == executor.id() && body.get("retryable").is_none()));
    let history: Vec<_> = attempts::history(&kairos.pool, &key)
        .await
        .expect("history")
        .into_iter()
        .map(|attempt| (attempt.attempt, attempt.status, attempt.error))
        .collect();
    let failed = |n: i32| {
        let error = format!("node load failed on attempt {n} (fails until attempt 3)");
        (n, RunStatus::Failed, Some(error))
    };
    assert_eq!(
        history,
        [failed(1), failed(2), (3, RunStatus::Success, None)]
    );
    // Each attempt's output, as the executor sent it with its end report.
    let outputs: Vec<_> = run_logs::of_run(&kairos.pool, &key)
        .await
        .expect("logs")
        .into_iter()
        .map(|log| (log.attempt, log.output.unwrap_or_default()))
        .collect();
    let nodes = "node extract (no action)\nnode load (no action)\n";
    let failed_output = |n: i32| {
        let error = format!("node load failed on attempt {n} (fails until attempt 3)");
        (n, format!("{nodes}{error}\n"))
    };
    assert_eq!(
        outputs,
        [failed_output(1), failed_output(2), (3, nodes.to_string())]
    );
    assert_eq!(
        kairos.launches().await,
        [key.clone(), format!("{key}:2"), format!("{key}:3")]
    );
}

async fn failing_job_is_dead_lettered_after_its_last_attempt(executor: Executor) {
    let kairos = Kairos::start().await;
    let dag = json!({"nodes": [{"id": "extract"}, {"id": "load", "fail": true}]});
    let policy = Policy {
        max_attempts: 2,
        retry_intervals_s: None,
        heartbeat_timeout_s: None,
    };
    let key = kairos.due_run("broken", dag, &policy).await;
    let mut running = executor.start(&kairos, BEATS).await;

    let run = kairos.ended(&key, &mut running).await;
    assert_eq!((run.status, run.attempt), (RunStatus::Failed, 2));
    assert!(
        run.dead_lettered_at.is_some(),
        "the last failure dead-letters"
    );
    let letters = kairos.dead_letters(&mut running).await;
    assert_eq!(letters.len(), 1, "one dead letter");
    assert_eq!(letters[0].msg_id, Some(format!("{key}:dlq:2")));
    let letter: Value = serde_json::from_slice(&letters[0].payload).expect("json");
    assert_eq!(
        (&letter["attempts"], &letter["last_error"]),
        (&json!(2), &json!("node load failed"))
    );
    let reports = kairos.reports(&key, "FAILED", 2).await;
    assert_eq!(
        steps(&reports),
        [
            step("STARTED", 1),
            step("FAILED", 1),
            step("STARTED", 2),
            step("FAILED", 2),
        ]
    );
    assert!(
        reports.iter().all(|body| body.get("retryable").is_none()),
        "a plain failure leaves the retry to the schedule's policy"
    );
}

async fn fatal_failure_is_dead_lettered_after_attempt_1(executor: Executor) {
    let kairos = Kairos::start().await;
    let dag = json!({"nodes": [{"id": "extract", "fatal": true}, {"id": "load"}]});
    let policy = Policy {
        max_attempts: 3,
        retry_intervals_s: Some(vec![1]),
        heartbeat_timeout_s: None,
    };
    let key = kairos.due_run("fatal", dag, &policy).await;
    let mut running = executor.start(&kairos, BEATS).await;

    let run = kairos.ended(&key, &mut running).await;
    assert_eq!((run.status, run.attempt), (RunStatus::Failed, 1));
    assert!(
        run.dead_lettered_at.is_some(),
        "dead-lettered although max_attempts is 3"
    );
    let letters = kairos.dead_letters(&mut running).await;
    assert_eq!(letters.len(), 1, "one dead letter");
    assert_eq!(letters[0].msg_id, Some(format!("{key}:dlq:1")));
    let reports = kairos.reports(&key, "FAILED", 1).await;
    assert_eq!(steps(&reports), [step("STARTED", 1), step("FAILED", 1)]);
    let failed = reports.last().expect("the FAILED report");
    assert_eq!(
        (&failed["retryable"], &failed["error"]),
        (&json!(false), &json!("node extract failed fatally"))
    );
    assert_eq!(kairos.launches().await, [key], "no second attempt");
}

async fn heartbeats_keep_a_run_alive_past_the_heartbeat_timeout(executor: Executor) {
    let kairos = Kairos::start().await;
    let dag = json!({"nodes": [{"id": "long", "sleep_ms": 4_000}]});
    let policy = Policy {
        max_attempts: 1,
        retry_intervals_s: None,
        heartbeat_timeout_s: Some(2),
    };
    let key = kairos.due_run("long", dag, &policy).await;
    let mut running = executor.start(&kairos, Duration::from_millis(300)).await;

    let run = kairos.ended(&key, &mut running).await;
    assert_eq!(
        (run.status, run.attempt),
        (RunStatus::Success, 1),
        "never timed out: {:?}",
        run.last_error
    );
    let reports = kairos.reports(&key, "SUCCESS", 1).await;
    assert_eq!(steps(&reports), [step("STARTED", 1), step("SUCCESS", 1)]);
    let beats: Vec<&Value> = reports
        .iter()
        .filter(|body| body["status"] == "HEARTBEAT")
        .collect();
    // 4 s of work at one beat per 300 ms is about 13; a loaded machine may send fewer.
    assert!(beats.len() >= 5, "{} heartbeats", beats.len());
    assert!(beats
        .iter()
        .all(|beat| beat["attempt"] == 1 && beat["executor_id"] == executor.id()));
}

async fn a_cancel_stops_the_run_and_the_executor_confirms_it(executor: Executor) {
    let kairos = Kairos::start().await;
    let dag = json!({"nodes": [{"id": "long", "sleep_ms": 120_000}]});
    let policy = Policy {
        max_attempts: 3,
        retry_intervals_s: Some(vec![1]),
        heartbeat_timeout_s: None,
    };
    let key = kairos.due_run("cancelme", dag, &policy).await;
    let mut running = executor.start(&kairos, BEATS).await;
    kairos.reports(&key, "STARTED", 1).await;

    // The operator cancels; the dispatcher's sweep publishes the cancel request.
    let intake = kairos_worker::intake::Intake::new(kairos.pool.clone());
    intake
        .cancel(&key, Some("operator stop"))
        .await
        .expect("cancel recorded");
    let run = kairos
        .reaches(&key, RunStatus::Cancelled, &mut running)
        .await;
    assert_eq!(
        run.reason.as_deref(),
        Some("cancelled by an operator: operator stop"),
        "confirmed by the executor, not timed out (the cancel timeout is 60 s)"
    );
    let reports = kairos.reports(&key, "CANCELLED", 1).await;
    assert_eq!(steps(&reports), [step("STARTED", 1), step("CANCELLED", 1)]);
    assert_eq!(run.attempt, 1);
    assert_eq!(kairos.launches().await, [key], "never retried");
}

/// The control for the heartbeat scenario: the same run with heartbeats further apart than
/// the timeout is timed out, so the scenario above proves that heartbeats kept it alive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_heartbeats_the_same_run_times_out() {
    let kairos = Kairos::start().await;
    let dag = json!({"nodes": [{"id": "long", "sleep_ms": 4_000}]});
    let policy = Policy {
        max_attempts: 1,
        retry_intervals_s: None,
        heartbeat_timeout_s: Some(2),
    };
    let key = kairos.due_run("long", dag, &policy).await;
    let mut running = Executor::Rust.start(&kairos, Duration::from_secs(10)).await;

    let run = kairos.ended(&key, &mut running).await;
    assert_eq!((run.status, run.attempt), (RunStatus::TimedOut, 1));
    assert!(run.dead_lettered_at.is_some());
}
