//! The `kairos-executor` binary against kairos's dispatcher loop, status intake and HTTP API
//! on real PostgreSQL and nats-server (`tests/kairos_support`): a run longer than the
//! consumer's ack wait runs once (progress acks), ten runs work at once (`--concurrency 10`),
//! a fresh durable does not replay launches published before it existed (deliver policy
//! new), and kairos's answer to `STARTED` decides whether a launch runs here.

use crate::kairos_support;

use std::time::{Duration, Instant};

use async_nats::jetstream::consumer;
use kairos_core::{Run, RunStatus};
use kairos_store::runs;
use kairos_support::{durable, most_at_once, once, settled, Binary, Kairos};
use serde_json::{json, Value};

/// How long the waits in this file may take before the test fails: they end in seconds.
const LIMIT: Duration = Duration::from_secs(30);

/// A run that takes longer than the consumer's ack wait is not redelivered meanwhile: the
/// executor's progress acks restart the ack wait, so the run works once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_longer_than_the_ack_wait_runs_once() {
    let kairos = Kairos::start().await;
    let mut binary = Binary::start(&kairos, &["--ack-wait-s", "2"]);
    let created = durable(&kairos, Binary::DURABLE, &mut binary.running).await;
    assert_eq!(created.config.ack_wait, Duration::from_secs(2));

    let dag = json!({"nodes": [{"id": "slow", "sleep_ms": 5_000}]});
    let key = kairos.due_run("longer-than-ack-wait", dag, &once()).await;
    let run = kairos.ended(&key, &mut binary.running).await;
    assert_eq!((run.status, run.attempt), (RunStatus::Success, 1));
    let reports = kairos.reports(&key, "SUCCESS", 1).await;
    let started = reports.iter().filter(|r| r["status"] == "STARTED").count();
    assert_eq!(started, 1, "one STARTED: {reports:?}");
    assert_eq!(
        binary.node_lines("longer-than-ack-wait"),
        1,
        "the node ran once"
    );
    let settled = settled(&kairos, Binary::DURABLE, &mut binary.running).await;
    assert_eq!(
        (settled.delivered.consumer_sequence, settled.num_redelivered),
        (1, 0),
        "the launch was delivered once, never redelivered"
    );
    assert_eq!(
        binary.lines_with(&format!("took {key} attempt 1 (delivery 1)")),
        1,
        "the executor saw delivery 1 and no other"
    );
    assert_eq!(binary.lines_with(&format!("took {key} ")), 1);
}

/// With `--concurrency 10`, ten runs of 2 s each are in flight together: judged from the
/// runs' own [started_at, finished_at] in the database, not from a wall-clock deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_runs_work_at_once() {
    let kairos = Kairos::start().await;
    let mut binary = Binary::start(&kairos, &["--concurrency", "10"]);
    durable(&kairos, Binary::DURABLE, &mut binary.running).await;

    let dag = json!({"nodes": [{"id": "work", "sleep_ms": 2_000}]});
    let mut keys = Vec::new();
    for i in 0..10 {
        let name = format!("parallel-{i}");
        keys.push(kairos.due_run(&name, dag.clone(), &once()).await);
    }
    let mut ended = Vec::new();
    for key in &keys {
        ended.push(kairos.ended(key, &mut binary.running).await);
    }
    assert!(
        ended
            .iter()
            .all(|run| (run.status, run.attempt) == (RunStatus::Success, 1)),
        "{ended:?}"
    );
    for i in 0..10 {
        assert_eq!(binary.node_lines(&format!("parallel-{i}")), 1);
    }
    let at_once = most_at_once(&ended);
    println!("{at_once} runs in flight at once");
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
    published(&kairos, &before).await;

    let mut binary = Binary::start(&kairos, &[]);
    let created = durable(&kairos, Binary::DURABLE, &mut binary.running).await;
    let after = kairos.due_run("after-the-executor", dag, &once()).await;
    let run = kairos.ended(&after, &mut binary.running).await;
    assert_eq!(run.status, RunStatus::Success);

    // Deliveries follow the stream's order, so the earlier launch would have come first.
    let settled = settled(&kairos, Binary::DURABLE, &mut binary.running).await;
    assert_eq!(
        settled.delivered.consumer_sequence, 1,
        "one launch delivered"
    );
    assert_eq!(get(&kairos, &before).await.status, RunStatus::Enqueued);
    assert_eq!(binary.node_lines("before-the-executor"), 0);
    assert_eq!(created.config.deliver_policy, consumer::DeliverPolicy::New);
}

/// Over HTTP kairos answers `STARTED` with the run, and the executor runs only a run that the
/// answer makes its own: not one another executor owns (409), and not one that already
/// ended (200 with `SUCCESS`: a launch delivered again after its run finished).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kairos_answer_to_started_decides_whether_a_launch_runs_here() {
    let mut kairos = Kairos::start().await;
    let api = kairos.serve_http().await;
    let http = reqwest::Client::new();
    let dag = json!({"nodes": [{"id": "step"}]});

    let elsewhere = kairos
        .due_run("claimed-elsewhere", dag.clone(), &once())
        .await;
    published(&kairos, &elsewhere).await;
    let answer = post_status(&http, &api, &elsewhere, "STARTED", "other-executor").await;
    assert_eq!(answer["executor_id"], "other-executor");

    let finished = kairos
        .due_run("finished-already", dag.clone(), &once())
        .await;
    published(&kairos, &finished).await;
    post_status(&http, &api, &finished, "STARTED", Binary::ID).await;
    let answer = post_status(&http, &api, &finished, "SUCCESS", Binary::ID).await;
    assert_eq!(answer["status"], "SUCCESS");

    // The durable takes the whole stream, so both launches above are delivered to it.
    let mut binary = Binary::start(&kairos, &["--kairos-url", &api, "--deliver-policy", "all"]);
    let here = kairos.due_run("runs-here", dag, &once()).await;
    let run = kairos.ended(&here, &mut binary.running).await;
    assert_eq!(
        (run.status, run.executor_id.as_deref()),
        (RunStatus::Success, Some(Binary::ID))
    );

    let settled = settled(&kairos, Binary::DURABLE, &mut binary.running).await;
    assert_eq!(
        settled.delivered.consumer_sequence, 3,
        "all three delivered"
    );
    assert_eq!(binary.node_lines("runs-here"), 1);
    assert_eq!(
        binary.node_lines("claimed-elsewhere"),
        0,
        "another executor's run is not run"
    );
    assert_eq!(
        binary.node_lines("finished-already"),
        0,
        "a finished run is not run again"
    );
    let elsewhere = get(&kairos, &elsewhere).await;
    assert_eq!(
        (elsewhere.status, elsewhere.executor_id.as_deref()),
        (RunStatus::Started, Some("other-executor"))
    );
    assert_eq!(get(&kairos, &finished).await.status, RunStatus::Success);
}

/// A run cancelled after it was published but before any executor started it: kairos
/// answers `STARTED` with the run `CANCELLING`, so the executor confirms `CANCELLED` without
/// running it (it started after the cancel request went out, so it never heard it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cancelled_before_it_started_is_confirmed_not_run() {
    let mut kairos = Kairos::start().await;
    let api = kairos.serve_http().await;
    let dag = json!({"nodes": [{"id": "step"}]});
    let key = kairos.due_run("cancelled-early", dag, &once()).await;
    published(&kairos, &key).await;
    let intake = kairos_worker::intake::Intake::new(kairos.pool.clone());
    intake
        .cancel(&key, Some("operator stop"))
        .await
        .expect("cancel recorded");
    assert_eq!(get(&kairos, &key).await.status, RunStatus::Cancelling);

    let mut binary = Binary::start(&kairos, &["--kairos-url", &api, "--deliver-policy", "all"]);
    let run = kairos
        .reaches(&key, RunStatus::Cancelled, &mut binary.running)
        .await;
    assert_eq!(
        run.reason.as_deref(),
        Some("cancelled by an operator: operator stop"),
        "confirmed by the executor, not timed out (the cancel timeout is 60 s)"
    );
    settled(&kairos, Binary::DURABLE, &mut binary.running).await;
    assert_eq!(binary.node_lines("cancelled-early"), 0, "never run");
}

async fn get(kairos: &Kairos, key: &str) -> Run {
    runs::get(&kairos.pool, key)
        .await
        .expect("read run")
        .expect("the run")
}

/// Waits until kairos has published run `key` (it is `ENQUEUED`).
async fn published(kairos: &Kairos, key: &str) {
    let deadline = Instant::now() + LIMIT;
    while get(kairos, key).await.status != RunStatus::Enqueued {
        assert!(Instant::now() < deadline, "run {key} was never published");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reports `status` about attempt 1 of `key` over HTTP as `executor_id`; kairos's answer.
async fn post_status(
    http: &reqwest::Client,
    api: &str,
    key: &str,
    status: &str,
    executor_id: &str,
) -> Value {
    let response = http
        .post(format!("{api}/runs/{key}/status"))
        .json(&json!({"status": status, "executor_id": executor_id, "attempt": 1}))
        .send()
        .await
        .expect("POST status");
    assert_eq!(response.status(), 200, "{status} about {key}");
    response.json().await.expect("the run")
}
