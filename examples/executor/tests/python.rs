//! The Python executor (`examples/executor-python`, written from `schemas/` alone): against a
//! bare nats-server, proof that the protocol is language-agnostic; then against kairos's
//! dispatcher loop and status intake (`tests/kairos_support`), where a run longer than the
//! consumer's ack wait runs once, ten runs work at once, and a fresh durable does not replay
//! the launches published before it existed. Needs `python3` with `nats-py` (`scripts/test`
//! installs it); a missing interpreter or package fails the test.

use crate::kairos_support;
use crate::support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::consumer;
use kairos_core::RunStatus;
use kairos_store::runs;
use kairos_support::{durable, most_at_once, once, settled, Executor, Kairos, Running};
use serde_json::{json, Value};
use support::{harness, Harness};

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../executor-python/executor.py"
);

/// The executor's durable consumer name (its default).
const DURABLE: &str = "python-executor";

/// How long the waits below may take before the test fails: they end in seconds.
const LIMIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn python_executor_runs_launches_and_reports_status() {
    let good = json!({"nodes": [{"id": "b", "depends_on": ["a"]}, {"id": "a"}]});
    let bad = json!({"nodes": [{"id": "a", "fail": true}]});
    let Harness {
        server,
        mut statuses,
        ..
    } = harness(&[("py-good", good), ("py-bad", bad)]).await;

    let mut child = Command::new("python3")
        .args([
            SCRIPT,
            "--nats-url",
            &server.url(),
            "--executor-id",
            "py-1",
            "--max-runs",
            "2",
            // The launches were published before the executor's durable existed.
            "--deliver-policy",
            "all",
        ])
        .spawn()
        .expect("python3 must be installed");
    let deadline = Instant::now() + LIMIT;
    let exit = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("python executor did not finish two runs");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        exit.success(),
        "python executor failed (is nats-py installed? scripts/test installs it)"
    );

    let mut seen: Vec<(String, String)> = Vec::new();
    for seq in 1..=statuses.info().await.expect("info").state.messages {
        let message = statuses.get_raw_message(seq).await.expect("status");
        let body: Value = serde_json::from_slice(&message.payload).expect("json");
        assert_eq!(body["executor_id"], "py-1");
        assert_eq!(
            body["attempt"], 1,
            "every report echoes the launch's attempt"
        );
        let key = body["idempotency_key"].as_str().expect("key").to_string();
        seen.push((key, body["status"].as_str().expect("status").to_string()));
    }
    let of = |key: &str| -> Vec<&str> {
        seen.iter()
            .filter(|(k, _)| k == key)
            .map(|(_, s)| s.as_str())
            .collect()
    };
    assert_eq!(of("py-good"), ["STARTED", "SUCCESS"]);
    assert_eq!(of("py-bad"), ["STARTED", "FAILED"]);
}

/// A run that takes longer than the consumer's ack wait is not redelivered meanwhile: the
/// executor's in-progress acks restart the ack wait, so the run works once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_longer_than_the_ack_wait_runs_once() {
    let kairos = Kairos::start().await;
    let mut python = Python::start(&kairos, &["--ack-wait-s", "2"]);
    let created = durable(&kairos, DURABLE, &mut python.running).await;
    assert_eq!(created.config.ack_wait, Duration::from_secs(2));

    let dag = json!({"nodes": [{"id": "slow", "sleep_ms": 5_000}]});
    let key = kairos.due_run("longer-than-ack-wait", dag, &once()).await;
    let run = kairos.ended(&key, &mut python.running).await;
    assert_eq!((run.status, run.attempt), (RunStatus::Success, 1));
    let reports = kairos.reports(&key, "SUCCESS", 1).await;
    let started = reports.iter().filter(|r| r["status"] == "STARTED").count();
    assert_eq!(started, 1, "one STARTED: {reports:?}");
    assert_eq!(
        python.node_lines("longer-than-ack-wait"),
        1,
        "the node ran once"
    );
    let settled = settled(&kairos, DURABLE, &mut python.running).await;
    assert_eq!(
        (settled.delivered.consumer_sequence, settled.num_redelivered),
        (1, 0),
        "the launch was delivered once, never redelivered"
    );
}

/// With `--concurrency 10`, ten runs of 2 s each are in flight together: judged from the
/// runs' own [started_at, finished_at] in the database, not from a wall-clock deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_runs_work_at_once() {
    let kairos = Kairos::start().await;
    let mut python = Python::start(&kairos, &["--concurrency", "10"]);
    durable(&kairos, DURABLE, &mut python.running).await;

    let dag = json!({"nodes": [{"id": "work", "sleep_ms": 2_000}]});
    let mut keys = Vec::new();
    for i in 0..10 {
        let name = format!("parallel-{i}");
        keys.push(kairos.due_run(&name, dag.clone(), &once()).await);
    }
    let mut ended = Vec::new();
    for key in &keys {
        ended.push(kairos.ended(key, &mut python.running).await);
    }
    assert!(
        ended
            .iter()
            .all(|run| (run.status, run.attempt) == (RunStatus::Success, 1)),
        "{ended:?}"
    );
    for i in 0..10 {
        assert_eq!(python.node_lines(&format!("parallel-{i}")), 1);
    }
    let at_once = most_at_once(&ended);
    let first_start = ended.iter().filter_map(|run| run.started_at).min();
    let last_end = ended.iter().filter_map(|run| run.finished_at).max();
    let spread = last_end.expect("ended") - first_start.expect("started");
    println!(
        "{at_once} runs in flight at once; {} ms from the first STARTED to the last end",
        spread.num_milliseconds()
    );
    // One after another, no two would overlap; all ten start within moments of each other.
    assert!(at_once >= 5, "only {at_once} runs were in flight together");
}

/// A durable the executor creates starts at new launches: one published before it existed
/// is not delivered (a fresh executor does not replay the stream), one published after is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_durable_does_not_replay_earlier_launches() {
    let kairos = Kairos::start().await;
    let dag = json!({"nodes": [{"id": "step"}]});
    let before = kairos
        .due_run("before-the-executor", dag.clone(), &once())
        .await;
    let deadline = Instant::now() + LIMIT;
    while kairos.launches().await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "the first run was never published"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut python = Python::start(&kairos, &[]);
    let created = durable(&kairos, DURABLE, &mut python.running).await;
    assert_eq!(created.config.deliver_policy, consumer::DeliverPolicy::New);
    let after = kairos.due_run("after-the-executor", dag, &once()).await;
    let run = kairos.ended(&after, &mut python.running).await;
    assert_eq!(run.status, RunStatus::Success);

    // Deliveries follow the stream's order, so the earlier launch would have come first.
    let settled = settled(&kairos, DURABLE, &mut python.running).await;
    assert_eq!(
        settled.delivered.consumer_sequence, 1,
        "one launch delivered"
    );
    let untouched = runs::get(&kairos.pool, &before)
        .await
        .expect("read run")
        .expect("the run");
    assert_eq!(untouched.status, RunStatus::Enqueued);
    assert_eq!(python.node_lines("before-the-executor"), 0);
}

/// The Python executor on kairos's NATS, reporting on the NATS status subject, its output
/// collected line by line (and echoed).
struct Python {
    running: Running,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Python {
    fn start(kairos: &Kairos, args: &[&str]) -> Python {
        let mut child = Command::new("python3")
            .arg(SCRIPT)
            .args(["--nats-url", &kairos.server.url()])
            .args(["--executor-id", Executor::Python.id()])
            .args(args)
            .env("PYTHONUNBUFFERED", "1")
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 must be installed");
        let stdout = child.stdout.take().expect("piped stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                println!("{line}");
                sink.lock().expect("lines lock").push(line);
            }
        });
        Python {
            running: Running::Python(child),
            lines,
        }
    }

    /// How many nodes of `workflow_id` the executor started (it logs each).
    fn node_lines(&self, workflow_id: &str) -> usize {
        let prefix = format!("executor: {workflow_id} ");
        let lines = self.lines.lock().expect("lines lock");
        lines
            .iter()
            .filter(|line| line.starts_with(&prefix) && line.contains(" node "))
            .count()
    }
}
