//! Taking launch messages off the stream: the durable consumer, the slots that bound how many
//! runs work at once, and the progress acks that keep a working run's message from being
//! redelivered.
//!
//! JetStream delivers a message again when it is not acknowledged within the consumer's ack
//! wait. A launch is acknowledged only when its run ended (so a crashed executor's runs come
//! back), and a run may take far longer than any ack wait; so while it works, its message gets
//! a progress ack (`AckKind::Progress`, JetStream's `+WPI`) every third of the ack wait, each
//! of which starts the ack wait again. If the executor dies the progress acks stop, and the
//! message is delivered again one ack wait later.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use async_nats::jetstream::{self, consumer::pull, consumer::DeliverPolicy, AckKind};
use futures::StreamExt;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::{cancel, handle, Cancels, Deliver, Handled, Launch, Reporter, Settings};

/// How long one pull request waits for a launch before the next is sent.
const FETCH_WAIT: Duration = Duration::from_secs(5);

/// The pause after a failed pull request (NATS away, say) before the next.
const FETCH_RETRY: Duration = Duration::from_secs(1);

/// Progress acks never come closer together than this, whatever the ack wait.
const MIN_PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// Consumes launch messages, up to `settings.concurrency` runs at once, until dropped (which
/// stops every run it is working on, unacknowledged). A failed pull request is logged and
/// tried again.
///
/// # Errors
/// When NATS cannot be reached, the stream does not exist, the durable cannot be made, or
/// `settings.concurrency` is 0.
pub async fn run(settings: &Settings, reporter: &Reporter) -> anyhow::Result<()> {
    anyhow::ensure!(
        settings.concurrency >= 1,
        "concurrency must be at least 1, got 0"
    );
    let client = async_nats::connect(&settings.nats_url)
        .await
        .with_context(|| format!("connect to {}", settings.nats_url))?;
    let cancels = Cancels::default();
    let listener =
        AbortOnDrop(cancel::listen(&client, &settings.subject_prefix, cancels.clone()).await?);
    let consumer = durable(jetstream::new(client), settings).await?;
    let config = &consumer.cached_info().config;
    let progress_every = (config.ack_wait / 3).max(MIN_PROGRESS_EVERY);
    println!(
        "executor: durable {}: deliver policy {:?}, ack wait {:?}, {} runs at once",
        settings.durable, config.deliver_policy, config.ack_wait, settings.concurrency
    );

    let worker = Arc::new(Worker {
        settings: settings.clone(),
        reporter: reporter.clone(),
        cancels,
    });
    let slots = Arc::new(Semaphore::new(settings.concurrency));
    // Dropped with this future, the set aborts the runs still working.
    let mut working = JoinSet::new();
    let _listener = listener;
    loop {
        let slot = slots
            .clone()
            .acquire_owned()
            .await
            .context("the slots are never closed")?;
        // Finished runs' tasks are only bookkeeping by now.
        while working.try_join_next().is_some() {}
        // A message is fetched only now that a slot is free: none waits in this process,
        // unworked, while its ack wait runs out.
        let message = match next_message(&consumer).await {
            Ok(Some(message)) => message,
            Ok(None) => continue,
            Err(err) => {
                eprintln!("executor: could not pull a launch message: {err:#}");
                tokio::time::sleep(FETCH_RETRY).await;
                continue;
            }
        };
        let worker = worker.clone();
        working.spawn(async move {
            worker.take(message, progress_every).await;
            drop(slot);
        });
    }
}

/// The durable consumer on the launch stream, made with `settings` when it does not exist.
async fn durable(
    jetstream: jetstream::Context,
    settings: &Settings,
) -> anyhow::Result<jetstream::consumer::PullConsumer> {
    let stream = jetstream
        .get_stream(&settings.stream)
        .await
        .with_context(|| format!("stream {} (start kairos serve first)", settings.stream))?;
    let deliver_policy = match settings.deliver {
        Deliver::New => DeliverPolicy::New,
        Deliver::All => DeliverPolicy::All,
    };
    // The config applies only when the durable does not exist yet; an existing one keeps
    // its own, which `run` logs and takes its progress interval from.
    stream
        .get_or_create_consumer(
            &settings.durable,
            pull::Config {
                durable_name: Some(settings.durable.clone()),
                deliver_policy,
                ack_wait: settings.ack_wait,
                ..Default::default()
            },
        )
        .await
        .with_context(|| format!("create the durable consumer {}", settings.durable))
}

/// One launch message, or `None` when none came within [`FETCH_WAIT`].
async fn next_message(
    consumer: &jetstream::consumer::PullConsumer,
) -> anyhow::Result<Option<jetstream::Message>> {
    let mut batch = consumer
        .batch()
        .max_messages(1)
        .expires(FETCH_WAIT)
        .messages()
        .await
        .map_err(|e| anyhow::anyhow!("pull request: {e}"))?;
    match batch.next().await {
        None => Ok(None),
        Some(Ok(message)) => Ok(Some(message)),
        Some(Err(err)) => Err(anyhow::anyhow!("pull request: {err}")),
    }
}

/// What every run's task shares.
struct Worker {
    settings: Settings,
    reporter: Reporter,
    cancels: Cancels,
}

impl Worker {
    /// One launch message, from delivery to acknowledgement, with a progress ack every
    /// `progress_every` while its run works.
    async fn take(&self, message: jetstream::Message, progress_every: Duration) {
        let launch = match serde_json::from_slice::<Launch>(&message.payload) {
            Ok(launch) => launch,
            Err(err) => {
                eprintln!("executor: not a launch message ({err}); terminating it");
                if let Err(err) = message.ack_with(AckKind::Term).await {
                    eprintln!("executor: could not terminate it: {err}");
                }
                return;
            }
        };
        let delivered = message.info().map_or(0, |info| info.delivered);
        println!(
            "executor: took {} attempt {} (delivery {delivered})",
            launch.idempotency_key, launch.attempt
        );
        let work = handle(&launch, &self.settings, &self.reporter, &self.cancels);
        tokio::pin!(work);
        let first = tokio::time::Instant::now() + progress_every;
        let mut progress = tokio::time::interval_at(first, progress_every);
        progress.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let handled = loop {
            tokio::select! {
                handled = &mut work => break handled,
                _ = progress.tick() => {
                    // A lost one is only logged: the next may get through before the ack
                    // wait ends, and if none does the run is delivered again, which kairos's
                    // answer to STARTED then turns away (over HTTP).
                    if let Err(err) = message.ack_with(AckKind::Progress).await {
                        eprintln!(
                            "executor: could not send a progress ack for {}: {err}",
                            launch.idempotency_key
                        );
                    }
                }
            }
        };
        if handled == Handled::Ack {
            if let Err(err) = message.ack().await {
                eprintln!(
                    "executor: could not acknowledge {}: {err}",
                    launch.idempotency_key
                );
            }
        }
    }
}

/// Aborts the task when dropped (a `JoinHandle` dropped only detaches it).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
