//! Mode `queue`: a queue behind one long run, and writes while schedules fire every second.
//!
//! One schedule `*/2 * * * * *` with overlap `queue`, the instances' launch deadline 15 s.
//! Its first run is held `STARTED` for `--hold-s`; every other launch (of it and of the
//! `--schedules` schedules firing every second under `--overlap`) is reported `STARTED` at
//! once and `SUCCESS` 300 ms later. Meanwhile the bench edits one of the every-second
//! schedules through `POST /schedules/upsert` twice a second and deploys its workflow every
//! few seconds, round-robin over the instances. After `--seconds` it prints: the queued
//! schedule's runs by status (none may fail by the deadline); for each run released from the
//! queue, `STARTED` applied − sent and applied − published (how soon a released run is
//! reportable); the pace the queue drained at; and how long each write took to answer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use async_nats::jetstream;
use chrono::{DateTime, Utc};
use futures::StreamExt;

use crate::fleet::Fleet;
use crate::percentile::percentile;
use crate::setup::{Scratch, WORKFLOW};
use crate::Args;

/// The schedule with the queue.
const QUEUED: &str = "queued";
/// How long after `STARTED` the executor reports `SUCCESS` (all runs but the held one).
const RUN_MS: u64 = 300;
/// The status subject prefix of `kairos serve`'s default config.
const STATUS_PREFIX: &str = "kairos.status";

/// The schedules of the scenario, as one deploy's `schedules`; `flip` alternates the
/// every-second schedules' spelling (`* * * * * *` / `*/1 * * * * *`), so each deploy and
/// upsert is an edit of a firing schedule.
fn schedules(args: &Args, flip: bool) -> Vec<serde_json::Value> {
    let mut all = vec![serde_json::json!({
        "schedule_id": QUEUED, "user_id": "bench", "cron_expr": "*/2 * * * * *",
        "timezone": "UTC", "overlap_policy": "queue", "max_queued": 100,
    })];
    all.extend((0..args.schedules).map(|i| every_second(args, i, flip)));
    all
}

fn every_second(args: &Args, i: usize, flip: bool) -> serde_json::Value {
    serde_json::json!({
        "schedule_id": format!("second-{i}"), "user_id": "bench",
        "cron_expr": if flip { "*/1 * * * * *" } else { "* * * * * *" },
        "timezone": "UTC", "overlap_policy": args.overlap,
    })
}

/// A write and how long it took to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Write {
    Upsert,
    Deploy,
}

/// Runs the scenario and prints its figures; with `--check`, fails when a run of the queued
/// schedule failed or a write was refused.
pub async fn run(args: &Args, scratch: &Scratch, fleet: &Fleet) -> Result<()> {
    let client = reqwest::Client::new();
    deploy(&client, &fleet.base_url(0), args, false).await?;
    let sent = Arc::new(Mutex::new(HashMap::new()));
    let (js, consumer) = crate::consume::launch_consumer(scratch).await?;
    let executor = tokio::spawn(execute(js, consumer, args.hold_s, sent.clone()));
    let urls: Vec<String> = (0..args.instances).map(|i| fleet.base_url(i)).collect();
    let writes = write_while(&client, &urls, args, Duration::from_secs(args.seconds)).await?;
    executor.abort();
    let sent = sent.lock().expect("not poisoned").clone();
    let runs = queued_runs(scratch).await?;
    let failed = print(args, &runs, &sent, &writes);
    let refused = writes.iter().filter(|w| w.2.is_none()).count();
    if args.check && (failed > 0 || refused > 0) {
        bail!("{failed} run(s) of the queued schedule failed, {refused} write(s) refused");
    }
    Ok(())
}

async fn deploy(client: &reqwest::Client, url: &str, args: &Args, flip: bool) -> Result<()> {
    let schedules = schedules(args, flip);
    kairos_testkit::deploy::workflow(client, url, WORKFLOW, schedules, Duration::from_secs(60))
        .await
        .map_err(anyhow::Error::msg)
}

/// Upserts one every-second schedule twice a second, and deploys every fifth write, for
/// `length`; returns each write with the time it took (`None`: refused or failed).
async fn write_while(
    client: &reqwest::Client,
    urls: &[String],
    args: &Args,
    length: Duration,
) -> Result<Vec<(Write, usize, Option<Duration>)>> {
    let started = Instant::now();
    let mut done = Vec::new();
    let mut n = 0usize;
    while started.elapsed() < length {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let url = &urls[n % urls.len()];
        let flip = n % 2 == 1;
        let began = Instant::now();
        let (kind, ok) = if n % 5 == 4 {
            (Write::Deploy, deploy(client, url, args, flip).await.is_ok())
        } else {
            let mut body = every_second(args, 0, flip);
            body["workflow_id"] = serde_json::json!(WORKFLOW);
            body["version"] = serde_json::json!(1);
            let answer = client
                .post(format!("{url}/schedules/upsert"))
                .json(&body)
                .timeout(Duration::from_secs(60))
                .send()
                .await;
            let ok = answer.is_ok_and(|a| a.status().is_success());
            (Write::Upsert, ok)
        };
        done.push((kind, n % urls.len(), ok.then(|| began.elapsed())));
        n += 1;
    }
    Ok(done)
}

/// The executor: reports on every launch, holding the queued schedule's first run; notes
/// when it sent each run's `STARTED`.
async fn execute(
    js: jetstream::Context,
    consumer: jetstream::consumer::PullConsumer,
    hold_s: u64,
    sent: Arc<Mutex<HashMap<String, DateTime<Utc>>>>,
) {
    let mut held = false;
    loop {
        let Ok(mut messages) = consumer.messages().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        while let Some(Ok(message)) = messages.next().await {
            let Ok(body) = serde_json::from_slice::<serde_json::Value>(&message.payload) else {
                continue;
            };
            let text = |name: &str| body[name].as_str().unwrap_or_default().to_string();
            let key = text("idempotency_key");
            let hold = text("schedule_id") == QUEUED && !held;
            held |= hold;
            let run_for = match hold {
                true => Duration::from_secs(hold_s),
                false => Duration::from_millis(RUN_MS),
            };
            let attempt = body["attempt"].as_u64().unwrap_or(1);
            let (js, sent) = (js.clone(), sent.clone());
            tokio::spawn(async move {
                report(&js, &key, attempt, "STARTED").await;
                sent.lock()
                    .expect("not poisoned")
                    .insert(key.clone(), Utc::now());
                tokio::time::sleep(run_for).await;
                report(&js, &key, attempt, "SUCCESS").await;
            });
        }
    }
}

async fn report(js: &jetstream::Context, key: &str, attempt: u64, status: &str) {
    let body = serde_json::json!({
        "idempotency_key": key, "status": status, "executor_id": "bench-executor",
        "attempt": attempt,
    });
    let payload = serde_json::to_vec(&body).expect("json").into();
    let stored = match js.publish(format!("{STATUS_PREFIX}.{key}"), payload).await {
        Ok(ack) => ack.await.map(|_| ()).map_err(|e| e.to_string()),
        Err(err) => Err(err.to_string()),
    };
    if let Err(err) = stored {
        eprintln!("bench executor: {status} for {key} not stored: {err}");
    }
}

/// One run of the queued schedule.
struct QueuedRun {
    key: String,
    run_at: DateTime<Utc>,
    status: String,
    reason: Option<String>,
    published_at: Option<DateTime<Utc>>,
    started_at: Option<DateTime<Utc>>,
}

async fn queued_runs(scratch: &Scratch) -> Result<Vec<QueuedRun>> {
    let rows: Vec<QueuedRow> = sqlx::query_as(
        "select idempotency_key, run_at, status, reason, published_at, started_at \
         from schedule_runs where schedule_id = $1 order by run_at",
    )
    .bind(QUEUED)
    .fetch_all(&scratch.pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(
            |(key, run_at, status, reason, published_at, started_at)| QueuedRun {
                key,
                run_at,
                status,
                reason,
                published_at,
                started_at,
            },
        )
        .collect())
}

/// A row of [`queued_runs`]: key, tick, status, reason, published, started.
type QueuedRow = (
    String,
    DateTime<Utc>,
    String,
    Option<String>,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
);

fn ms(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    (to - from).num_microseconds().unwrap_or(0) as f64 / 1000.0
}

fn spread(mut values: Vec<f64>) -> String {
    values.sort_by(f64::total_cmp);
    format!(
        "n {}, p50 {:.0}, p99 {:.0}, max {:.0}",
        values.len(),
        percentile(&values, 0.5),
        percentile(&values, 0.99),
        values.last().copied().unwrap_or(f64::NAN)
    )
}

/// Prints the figures; returns the runs of the queued schedule that failed.
fn print(
    args: &Args,
    runs: &[QueuedRun],
    sent: &HashMap<String, DateTime<Utc>>,
    writes: &[(Write, usize, Option<Duration>)],
) -> usize {
    let cores = crate::machine::cores();
    println!(
        "kairos-bench Queue: {} instance(s), `{QUEUED}` (*/2 s, overlap queue, launch deadline \
         15 s, first run held {} s) + {} schedule(s) every second ({}), {} s; machine: {cores} cores",
        args.instances, args.hold_s, args.schedules, args.overlap, args.seconds
    );
    let mut by_status: HashMap<&str, usize> = HashMap::new();
    for run in runs {
        *by_status.entry(run.status.as_str()).or_default() += 1;
    }
    let mut counts: Vec<_> = by_status.into_iter().collect();
    counts.sort();
    println!("runs of `{QUEUED}` by status: {counts:?}");
    let failed: Vec<&QueuedRun> = runs.iter().filter(|r| r.status == "FAILED").collect();
    for run in &failed {
        println!("  FAILED {} ({}): {:?}", run.key, run.run_at, run.reason);
    }
    // Released from the queue: published more than a second after its tick.
    let released: Vec<&QueuedRun> = runs
        .iter()
        .filter(|r| r.published_at.is_some_and(|p| ms(r.run_at, p) > 1_000.0))
        .collect();
    let lag = |f: &dyn Fn(&QueuedRun) -> Option<f64>| -> Vec<f64> {
        released.iter().filter_map(|r| f(r)).collect()
    };
    println!(
        "released from the queue: {}; STARTED applied − sent (ms): {}",
        released.len(),
        spread(lag(&|r| Some(ms(*sent.get(&r.key)?, r.started_at?))))
    );
    println!(
        "  STARTED applied − published (ms): {}",
        spread(lag(&|r| Some(ms(r.published_at?, r.started_at?))))
    );
    let mut published: Vec<DateTime<Utc>> =
        released.iter().filter_map(|r| r.published_at).collect();
    published.sort();
    let gaps = published.windows(2).map(|w| ms(w[0], w[1])).collect();
    println!(
        "  between releases (ms; the executor takes {RUN_MS} ms a run): {}",
        spread(gaps)
    );
    for kind in [Write::Upsert, Write::Deploy] {
        let mine = writes.iter().filter(|w| w.0 == kind);
        let answered: Vec<f64> = mine
            .clone()
            .filter_map(|w| Some(w.2?.as_secs_f64() * 1000.0))
            .collect();
        let refused = mine.filter(|w| w.2.is_none()).count();
        println!(
            "{kind:?} of a firing schedule, answered in (ms): {}; refused or failed: {refused}",
            spread(answered)
        );
    }
    failed.len()
}
