//! Mode `loop`: a fast executor in the bench's own process. It pulls every launch message
//! and reports on the subject the message names (`status_subject`) what a real executor
//! would: `STARTED`,
//! `--heartbeats` × `HEARTBEAT`, then `SUCCESS` (or, for `--fail-share` of first attempts,
//! `FAILED`, which the schedule retries once). Every publish is a JetStream publish whose
//! acknowledgement is awaited per chunk, so the executor never runs ahead of the stream. It
//! notes when it received each launch and when it sent each run's last report.
//!
//! Receiving and reporting are two tasks joined by a queue, as a fleet of executors takes
//! launches while its runs report: a launch counts as received when its message reaches
//! the executor, not when the executor's reports of earlier runs are acknowledged, so the
//! received time measures kairos and the broker rather than this one process's publishing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use async_nats::jetstream;
use chrono::{DateTime, Utc};
use futures::future::join_all;
use futures::StreamExt;

use crate::consume::Received;
use crate::setup::Scratch;
use crate::Args;

/// Launch messages asked for in one pull request.
const PULL_BATCH: usize = 5_000;
/// Pull requests outstanding at once.
const PULLS_AT_ONCE: usize = 2;
/// How long one pull request waits for messages before it ends.
const PULL_EXPIRES: Duration = Duration::from_secs(1);
/// Launch messages handled at once (their reports are published, then their acks awaited).
const CHUNK: usize = 1_000;
/// Chunks of launch messages handled side by side.
const CHUNKS_AT_ONCE: usize = 4;
/// Acknowledgements a chunk leaves unawaited at most: all chunks together stay below the
/// client's limit of 5,000 (past it a publish waits for an acknowledgement that nobody
/// awaits yet).
const ACKS_AT_ONCE: usize = 4_000 / CHUNKS_AT_ONCE;

/// What the executor did for one run attempt.
#[derive(Debug, Clone)]
pub struct Reported {
    /// The launch as received.
    pub received: Received,
    /// When it sent the attempt's last report (`SUCCESS` or `FAILED`).
    pub last_report_at: DateTime<Utc>,
    /// Reports it sent for the attempt.
    pub reports: usize,
    /// It reported `FAILED`.
    pub failed: bool,
}

/// The executor running in the background.
#[derive(Debug)]
pub struct Executor {
    done: Arc<Mutex<HashMap<(String, u64), Reported>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Executor {
    /// Attaches a consumer to the launch stream (`consume::launch_consumer`) and starts
    /// reporting, on a second connection.
    pub async fn start(args: &Args, scratch: &Scratch) -> Result<Executor> {
        // Reports go out on a connection of their own, so a backlog of reports waiting for
        // their acknowledgements never delays the pull requests that receive launches.
        let (_, consumer) = crate::consume::launch_consumer(scratch).await?;
        let js = jetstream::new(scratch.nats().await?);
        let done = Arc::new(Mutex::new(HashMap::new()));
        let sink = done.clone();
        let plan = Plan {
            heartbeats: args.heartbeats,
            fail_per_mille: (args.fail_share * 1000.0).round() as u64,
        };
        let (queue, queued) = futures::channel::mpsc::unbounded::<Received>();
        // Pull requests that each end when filled or expired, [`PULLS_AT_ONCE`] of them
        // outstanding: the next is sent as soon as one ends, so no request is ever believed
        // pending when the server has let it go, and messages keep flowing while a new
        // request is on its way.
        let receiving = join_all((0..PULLS_AT_ONCE).map(|_| {
            let (consumer, queue) = (consumer.clone(), queue.clone());
            async move {
                loop {
                    let pulled = consumer
                        .batch()
                        .max_messages(PULL_BATCH)
                        .expires(PULL_EXPIRES)
                        .messages()
                        .await;
                    let Ok(mut messages) = pulled else {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    };
                    while let Some(message) = messages.next().await {
                        let Some(launch) = message.ok().as_ref().and_then(Received::parse) else {
                            continue;
                        };
                        if queue.unbounded_send(launch).is_err() {
                            return;
                        }
                    }
                }
            }
        }));
        // Chunks side by side: one chunk's acknowledgements are awaited while the next is
        // published, so the reports are not paced by a round trip per chunk.
        let reporting =
            queued
                .ready_chunks(CHUNK)
                .for_each_concurrent(CHUNKS_AT_ONCE, move |launches| {
                    let (js, sink) = (js.clone(), sink.clone());
                    async move {
                        let reported = plan.report(&js, launches).await;
                        let mut done = sink.lock().expect("not poisoned");
                        for run in reported {
                            done.insert((run.received.key.clone(), run.received.attempt), run);
                        }
                    }
                });
        let task = tokio::spawn(async move {
            futures::join!(receiving, reporting);
        });
        Ok(Executor { done, task })
    }

    /// Every attempt reported so far.
    pub fn reported(&self) -> Vec<Reported> {
        self.done
            .lock()
            .expect("not poisoned")
            .values()
            .cloned()
            .collect()
    }

    /// Stops it and returns every attempt reported.
    pub fn finish(self) -> Vec<Reported> {
        self.task.abort();
        self.reported()
    }
}

/// What the executor sends for each attempt.
#[derive(Debug, Clone, Copy)]
struct Plan {
    heartbeats: usize,
    fail_per_mille: u64,
}

impl Plan {
    /// Whether this attempt fails: a fixed share of first attempts, chosen by key.
    fn fails(self, launch: &Received) -> bool {
        let digits = launch.key.get(..8).unwrap_or("0");
        let pick = u64::from_str_radix(digits, 16).unwrap_or(0) % 1000;
        launch.attempt == 1 && pick < self.fail_per_mille
    }

    /// Publishes every report of `launches` (in order per run), then awaits every ack.
    async fn report(self, js: &jetstream::Context, launches: Vec<Received>) -> Vec<Reported> {
        let mut acks = Vec::with_capacity(launches.len() * (2 + self.heartbeats));
        let mut reported = Vec::with_capacity(launches.len());
        for launch in launches {
            let failed = self.fails(&launch);
            let subject = launch.status_subject.clone();
            let mut bodies = vec!["STARTED"; 1];
            bodies.extend(std::iter::repeat_n("HEARTBEAT", self.heartbeats));
            bodies.push(if failed { "FAILED" } else { "SUCCESS" });
            let reports = bodies.len();
            for status in bodies {
                let payload = report_body(&launch.key, status, launch.attempt).into();
                match js.publish(subject.clone(), payload).await {
                    Ok(ack) => acks.push(ack),
                    Err(err) => eprintln!("bench executor: publish failed: {err}"),
                }
                if acks.len() >= ACKS_AT_ONCE {
                    await_acks(std::mem::take(&mut acks)).await;
                }
            }
            reported.push(Reported {
                received: launch,
                last_report_at: Utc::now(),
                reports,
                failed,
            });
        }
        await_acks(acks).await;
        reported
    }
}

/// The body of one report the executor sends about attempt `attempt` of run `key`.
pub(crate) fn report_body(key: &str, status: &str, attempt: u64) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "idempotency_key": key,
        "status": status,
        "executor_id": "bench-executor",
        "attempt": attempt,
    }))
    .expect("json")
}

async fn await_acks(acks: Vec<jetstream::context::PublishAckFuture>) {
    for ack in join_all(acks.into_iter().map(std::future::IntoFuture::into_future)).await {
        if let Err(err) = ack {
            eprintln!("bench executor: a report was not stored: {err}");
        }
    }
}
