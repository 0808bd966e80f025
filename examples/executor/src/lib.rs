//! An example executor for kairos, written only from `schemas/launch.schema.json`,
//! `schemas/dag.schema.json` and `schemas/status.schema.json` (no kairos crate is used).
//!
//! It pulls launch messages from the `KAIROS_LAUNCH` stream with a durable consumer, reports
//! `STARTED`, "runs" the DAG's nodes in dependency order, reports `SUCCESS` or `FAILED`, and
//! only then acknowledges the message — so a crash mid-run means redelivery, and kairos's
//! forward-only status plus its "first STARTED owns the run" rule keep a tick from running
//! twice on two executors. Demo node fields: `sleep_ms` (how long the node "runs") and
//! `fail` (make it fail).

mod dag;
mod report;

use std::time::Duration;

use anyhow::Context;
use async_nats::jetstream::{self, consumer::pull, AckKind};
use futures::StreamExt;
use serde::Deserialize;

pub use dag::dependency_order;
pub use report::{Outcome, Reporter, Status, StatusUpdate};

/// The launch message body (`schemas/launch.schema.json`); fields not needed here are skipped.
#[derive(Debug, Clone, Deserialize)]
pub struct Launch {
    /// The run's key: report status under it.
    pub idempotency_key: String,
    /// The workflow launched.
    pub workflow_id: String,
    /// The planned tick.
    pub scheduled_for: String,
    /// 1, or more for an intentional re-launch.
    pub attempt: u32,
    /// The DAG to run.
    pub dag: serde_json::Value,
}

/// Where to consume from and who this executor is.
#[derive(Debug, Clone)]
pub struct Settings {
    /// NATS server URL.
    pub nats_url: String,
    /// The launch stream (`KAIROS_LAUNCH`).
    pub stream: String,
    /// Durable consumer name; executors sharing it share the work.
    pub durable: String,
    /// This executor's id, sent with every status.
    pub executor_id: String,
}

/// Consumes launch messages until the stream of messages ends.
///
/// # Errors
/// When NATS cannot be reached or the stream does not exist.
pub async fn run(settings: &Settings, reporter: &Reporter) -> anyhow::Result<()> {
    let client = async_nats::connect(&settings.nats_url)
        .await
        .with_context(|| format!("connect to {}", settings.nats_url))?;
    let stream = jetstream::new(client)
        .get_stream(&settings.stream)
        .await
        .with_context(|| format!("stream {} (start kairos serve first)", settings.stream))?;
    let consumer: jetstream::consumer::PullConsumer = stream
        .get_or_create_consumer(
            &settings.durable,
            pull::Config {
                durable_name: Some(settings.durable.clone()),
                ack_wait: Duration::from_secs(60),
                ..Default::default()
            },
        )
        .await
        .context("create the durable consumer")?;
    let mut messages = consumer.messages().await.context("pull messages")?;
    while let Some(message) = messages.next().await {
        let message = message.context("receive a launch message")?;
        match serde_json::from_slice::<Launch>(&message.payload) {
            Ok(launch) => {
                handle(&launch, &settings.executor_id, reporter).await;
                message
                    .ack()
                    .await
                    .map_err(|e| anyhow::anyhow!("ack: {e}"))?;
            }
            Err(err) => {
                eprintln!("executor: not a launch message ({err}); terminating it");
                let _ = message.ack_with(AckKind::Term).await;
            }
        }
    }
    Ok(())
}

/// Runs one launch: STARTED, the nodes in order, then SUCCESS or FAILED.
pub async fn handle(launch: &Launch, executor_id: &str, reporter: &Reporter) {
    let key = &launch.idempotency_key;
    let started = StatusUpdate::new(Status::Started, executor_id);
    match reporter.report(key, &started).await {
        Ok(Outcome::Accepted) => {}
        Ok(Outcome::OwnedByAnother) => {
            println!("executor: {key} is owned by another executor; not running it");
            return;
        }
        Err(err) => {
            // Without a STARTED on record we cannot claim the run; leave it to redelivery.
            eprintln!("executor: could not report STARTED for {key}: {err:#}");
            return;
        }
    }
    let result = run_nodes(launch).await;
    let done = match &result {
        Ok(()) => StatusUpdate::new(Status::Success, executor_id),
        Err(error) => StatusUpdate::new(Status::Failed, executor_id).with_error(error),
    };
    if let Err(err) = reporter.report(key, &done).await {
        eprintln!("executor: could not report the end of {key}: {err:#}");
    }
}

async fn run_nodes(launch: &Launch) -> Result<(), String> {
    let order = dependency_order(&launch.dag)?;
    for node in &order {
        let spec = launch.dag["nodes"]
            .as_array()
            .and_then(|nodes| nodes.iter().find(|n| n["id"] == node.as_str()))
            .cloned()
            .unwrap_or_default();
        let sleep_ms = spec["sleep_ms"].as_u64().unwrap_or(0);
        println!(
            "executor: {} {} node {node} ({})",
            launch.workflow_id,
            launch.scheduled_for,
            spec["action"].as_str().unwrap_or("no action")
        );
        tokio::time::sleep(Duration::from_millis(sleep_ms)).await;
        if spec["fail"].as_bool() == Some(true) {
            return Err(format!("node {node} failed"));
        }
    }
    Ok(())
}
