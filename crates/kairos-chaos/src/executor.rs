//! The executor of the run: a durable JetStream pull consumer on the launch stream that
//! records every message (stream sequence, `Nats-Msg-Id`, run key) and reports `STARTED`
//! then `SUCCESS` on the subject the launch names (`status_subject`; `<prefix>.status.<key>`
//! in a message without one) (JetStream publish, `schemas/status.schema.json`),
//! acknowledging the launch only once both reports are stored. A report that cannot be sent
//! (NATS is down) is retried; a launch never acknowledged is delivered again, and a second
//! delivery of the same stream sequence is not a second message.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy};
use futures::StreamExt;

/// The launch stream `kairos serve` creates with the default config.
const STREAM: &str = "KAIROS_LAUNCH";
/// The status subject prefix of the default config.
const PREFIX: &str = "kairos";
/// Reports in flight at once.
const IN_FLIGHT: usize = 256;

/// One stored launch message.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Its `Nats-Msg-Id`.
    pub msg_id: String,
    /// The run's key.
    pub key: String,
}

/// What the executor saw, shared with its background task.
#[derive(Debug, Default)]
struct Shared {
    /// Stream sequence -> message.
    by_seq: Mutex<HashMap<u64, Seen>>,
    /// The newest stream timestamp received (Unix ns).
    newest_ns: AtomicI64,
    /// Reports that failed and were tried again.
    report_retries: AtomicI64,
}

/// The executor running in the background.
#[derive(Debug)]
pub struct Executor {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Executor {
    /// Attaches the durable consumer `chaos` (every message from the first) and starts.
    pub async fn start(nats_url: &str) -> Result<Executor> {
        let client = async_nats::connect(nats_url).await?;
        let jetstream = jetstream::new(client);
        let stream = jetstream
            .get_stream(STREAM)
            .await
            .context("the launch stream (kairos serve creates it)")?;
        let consumer = stream
            .get_or_create_consumer(
                "chaos",
                pull::Config {
                    durable_name: Some("chaos".into()),
                    ack_policy: AckPolicy::Explicit,
                    ack_wait: Duration::from_secs(30),
                    max_ack_pending: 20_000,
                    ..Default::default()
                },
            )
            .await?;
        let shared = Arc::new(Shared::default());
        let task = tokio::spawn(consume(consumer, jetstream, shared.clone()));
        Ok(Executor { shared, task })
    }

    /// The newest stream timestamp of a message received (Unix ns; 0 before the first).
    pub fn newest_ns(&self) -> i64 {
        self.shared.newest_ns.load(Ordering::Relaxed)
    }

    /// Messages received (distinct stream sequences).
    pub fn received(&self) -> usize {
        self.shared.by_seq.lock().expect("not poisoned").len()
    }

    /// Status reports that had to be sent again.
    pub fn report_retries(&self) -> i64 {
        self.shared.report_retries.load(Ordering::Relaxed)
    }

    /// Every message received, by stream sequence.
    pub fn seen(&self) -> HashMap<u64, Seen> {
        self.shared.by_seq.lock().expect("not poisoned").clone()
    }

    /// Stops receiving.
    pub fn stop(&self) {
        self.task.abort();
    }
}

async fn consume(
    consumer: jetstream::consumer::PullConsumer,
    jetstream: jetstream::Context,
    shared: Arc<Shared>,
) {
    let permits = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    // A pull error (NATS down, a missed heartbeat) ends one pull, not the executor: open a
    // new pull and go on.
    loop {
        let Ok(mut messages) = consumer.messages().await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        while let Some(message) = messages.next().await {
            let Ok(message) = message else { continue };
            let Ok(info) = message.info() else { continue };
            let (seq, published_ns) = (
                info.stream_sequence,
                i64::try_from(info.published.unix_timestamp_nanos()).unwrap_or(i64::MAX),
            );
            let body: serde_json::Value =
                serde_json::from_slice(&message.payload).unwrap_or_default();
            let key = body["idempotency_key"].as_str().unwrap_or("").to_string();
            let subject = match body["status_subject"].as_str() {
                Some(named) => named.to_string(),
                None => format!("{PREFIX}.status.{key}"),
            };
            let attempt = body["attempt"].as_u64().unwrap_or(1);
            let msg_id = message
                .headers
                .as_ref()
                .and_then(|h| h.get(async_nats::header::NATS_MESSAGE_ID))
                .map(|v| v.as_str().to_string())
                .unwrap_or_default();
            shared
                .by_seq
                .lock()
                .expect("not poisoned")
                .entry(seq)
                .or_insert(Seen {
                    msg_id,
                    key: key.clone(),
                });
            shared.newest_ns.fetch_max(published_ns, Ordering::Relaxed);
            let Ok(permit) = permits.clone().acquire_owned().await else {
                return;
            };
            let (jetstream, shared) = (jetstream.clone(), shared.clone());
            tokio::spawn(async move {
                let _permit = permit;
                for status in ["STARTED", "SUCCESS"] {
                    if !report(&jetstream, &shared, (&key, &subject), attempt, status).await {
                        return; // not acknowledged: delivered again after ack_wait
                    }
                }
                let _ = message.ack().await;
            });
        }
    }
}

/// Publishes one status of run `key` on `subject` until the stream stores it (at most 2
/// minutes).
async fn report(
    jetstream: &jetstream::Context,
    shared: &Shared,
    (key, subject): (&str, &str),
    attempt: u64,
    status: &str,
) -> bool {
    let body = serde_json::json!({
        "status": status,
        "idempotency_key": key,
        "attempt": attempt,
        "executor_id": "kairos-chaos",
    });
    let payload = serde_json::to_vec(&body).unwrap_or_default();
    for _ in 0..240 {
        let sent = tokio::time::timeout(Duration::from_secs(5), async {
            let ack = jetstream
                .publish(subject.to_string(), payload.clone().into())
                .await?;
            ack.await?;
            Ok::<(), anyhow::Error>(())
        })
        .await;
        if matches!(sent, Ok(Ok(_))) {
            return true;
        }
        shared.report_retries.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    false
}
