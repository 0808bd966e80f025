//! The executor's side of a burst: a JetStream pull consumer on the launch stream that
//! notes, for every message, its run, attempt, planned time, when the stream stored it and
//! when it arrived.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy};
use chrono::{DateTime, Utc};
use futures::StreamExt;

use crate::setup::Scratch;
use crate::Args;

/// One launch message as the consumer saw it.
#[derive(Debug, Clone)]
pub struct Received {
    /// The run's key.
    pub key: String,
    /// The attempt it launches.
    pub attempt: u64,
    /// The planned tick.
    pub scheduled_for: DateTime<Utc>,
    /// When the stream stored it: its publish (the server's clock, on this machine).
    pub stored: DateTime<Utc>,
    /// When it arrived (this machine's clock, which is also the database's).
    pub at: DateTime<Utc>,
    /// Where the executor reports its status: the subject the message names.
    pub status_subject: String,
}

impl Received {
    /// A launch message's run, attempt, planned time and store time, received now.
    pub fn parse(message: &jetstream::Message) -> Option<Received> {
        let at = Utc::now();
        let stored = message
            .info()
            .ok()
            .map(|info| info.published.unix_timestamp_nanos())
            .and_then(|nanos| i64::try_from(nanos).ok())
            .map(DateTime::from_timestamp_nanos)?;
        let body = serde_json::from_slice::<serde_json::Value>(&message.payload).ok()?;
        let field = |name: &str| body.get(name).and_then(|v| v.as_str()).unwrap_or("");
        let key = field("idempotency_key").to_string();
        Some(Received {
            status_subject: match field("status_subject") {
                "" => format!("kairos.status.{key}"),
                named => named.to_string(),
            },
            key,
            attempt: body.get("attempt").and_then(|v| v.as_u64()).unwrap_or(1),
            scheduled_for: field("scheduled_for").parse().ok()?,
            stored,
            at,
        })
    }
}

/// A consumer receiving in the background.
#[derive(Debug)]
pub struct Consumer {
    seen: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

/// The launch stream `kairos serve` creates with the default config.
const STREAM: &str = "KAIROS_LAUNCH";

impl Consumer {
    /// Attaches an ephemeral consumer (no acks: it measures delivery, it runs nothing).
    pub async fn start(_args: &Args, scratch: &Scratch) -> Result<Consumer> {
        let (_, consumer) = launch_consumer(scratch).await?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let task = tokio::spawn(async move {
            // A pull error (a missed heartbeat under load) ends one pull, not the
            // measurement: keep reading, and open a new pull if the stream of messages ends.
            loop {
                let Ok(mut messages) = consumer.messages().await else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                while let Some(message) = messages.next().await {
                    let Ok(message) = message else { continue };
                    if let Some(received) = Received::parse(&message) {
                        sink.lock().expect("not poisoned").push(received);
                    }
                }
            }
        });
        Ok(Consumer { seen, task })
    }

    /// Waits until `expected` messages planned in `[from, to]` arrived, or until none
    /// arrived for 5 s, then stops and returns every message seen.
    pub async fn finish(
        self,
        expected: usize,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Vec<Received> {
        let count = || {
            let seen = self.seen.lock().expect("not poisoned");
            seen.iter()
                .filter(|r| r.scheduled_for >= from && r.scheduled_for <= to)
                .count()
        };
        let mut last = (count(), Instant::now());
        while last.0 < expected && last.1.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = count();
            if now != last.0 {
                last = (now, Instant::now());
            }
        }
        self.task.abort();
        let seen = self.seen.lock().expect("not poisoned");
        seen.clone()
    }
}

/// A pull consumer (ephemeral, or durable and replicated on a cluster) of every message of the launch stream, with no acks (the
/// bench measures delivery and has no redelivery), and the JetStream context it is on.
pub async fn launch_consumer(
    scratch: &Scratch,
) -> Result<(jetstream::Context, jetstream::consumer::PullConsumer)> {
    let client = scratch.nats().await?;
    let js = jetstream::new(client);
    let stream = js
        .get_stream(STREAM)
        .await
        .context("the launch stream (kairos serve creates it)")?;
    // On a cluster (`--nats-cluster`) the consumer is replicated on every node, so it
    // outlives the node a fault kills; alone, an ephemeral one lives on one server.
    let replicas = scratch.cluster_size().unwrap_or(0);
    let consumer = stream
        .create_consumer(pull::Config {
            durable_name: (replicas > 0).then(|| "kairos-bench".to_string()),
            num_replicas: replicas,
            ack_policy: AckPolicy::None,
            inactive_threshold: Duration::from_secs(600),
            ..Default::default()
        })
        .await?;
    Ok((js, consumer))
}

/// Messages in the launch stream and runs the database says were published (one message
/// per published run: the bench has no retries). Equal when no launch was lost or doubled
/// on the way into the stream, whatever a consumer saw.
pub async fn stream_matches_database(scratch: &Scratch) -> Result<(u64, i64)> {
    let client = scratch.nats().await?;
    let js = jetstream::new(client);
    // After a node was killed (`--kill-stream-leader-ms`) a request may meet an election:
    // asked again for up to 30 s.
    let started = std::time::Instant::now();
    let in_stream = loop {
        let info = async {
            js.get_stream(STREAM)
                .await?
                .info()
                .await
                .map(|i| i.state.messages)
                .map_err(anyhow::Error::from)
        };
        match info.await {
            Ok(messages) => break messages,
            Err(err) if started.elapsed() < std::time::Duration::from_secs(30) => {
                eprintln!("bench: reading {STREAM} failed ({err}); asking again");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            Err(err) => return Err(err.context(format!("read {STREAM}'s state"))),
        }
    };
    let published: i64 =
        sqlx::query_scalar("select count(*) from schedule_runs where published_at is not null")
            .fetch_one(&scratch.pool)
            .await?;
    Ok((in_stream, published))
}
