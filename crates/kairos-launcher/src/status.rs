//! Status intake over NATS: executors publish the status callback body
//! (`schemas/status.schema.json`, with `idempotency_key`) on
//! `<prefix>.status.<idempotency_key>`; [`StatusConsumer`] reads them from stream
//! `<stream_prefix>_STATUS` (`KAIROS_STATUS`) through one durable pull consumer shared by every kairos instance, hands
//! them to a handler in batches of [`StatusMessage`]s (whatever has arrived, up to
//! [`MAX_CHUNK`]; the worker's intake decodes, checks and records a batch in one
//! transaction), and acknowledges, redelivers or terminates each as the handler says, after
//! the handler answered (so after the commit).
//!
//! The stream is a work queue: a message leaves it once acknowledged or terminated. A
//! handler that cannot record a report now (database down) asks for redelivery, at most
//! [`MAX_DELIVER`] deliveries in all.
//!
//! Partitioned ([`Lane::Partition`]): when the NATS server maps `<prefix>.status.*` onto
//! `<prefix>.status.{{partition(N,1)}}.{{wildcard(1)}}`, each partition has its durable
//! consumer (`kairos-status-<p>`, filtered on `<prefix>.status.<p>.*`), consumed by the one
//! instance that holds its lease, so every report of a run reaches one instance. Reports
//! published where no mapping applies stay on `<prefix>.status.<key>`, consumed by every
//! instance through `kairos-status-direct` ([`Lane::Direct`]). A work queue lets consumers
//! share a stream only when their filters do not overlap, so the unfiltered
//! [`STATUS_CONSUMER`] and the partitioned ones never live together: connecting one lane
//! removes the other kind.

use std::future::Future;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy};
use async_nats::jetstream::{self, stream, AckKind};
use futures::StreamExt;

use crate::{Error, NatsLauncher, Result};

mod subject;

pub use subject::{partition_of, status_subject, StatusSubjects};

/// The status stream's name under the default `nats.stream_prefix`.
pub const STATUS_STREAM: &str = "KAIROS_STATUS";
/// The durable consumer every instance shares.
pub const STATUS_CONSUMER: &str = "kairos-status";

/// The durable consumer of reports on `<prefix>.status.<key>` when the stream is
/// partitioned.
pub const DIRECT_CONSUMER: &str = "kairos-status-direct";

/// Which status messages a [`StatusConsumer`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Every message, through [`STATUS_CONSUMER`], shared by every instance (the stream is
    /// not partitioned).
    All,
    /// The messages on `<prefix>.status.<key>` of a partitioned stream, through
    /// [`DIRECT_CONSUMER`], shared by every instance.
    Direct,
    /// One partition's messages, on `<prefix>.status.<p>.<key>`.
    Partition(u16),
}

impl Lane {
    /// The durable consumer's name.
    #[must_use]
    pub fn consumer(self) -> String {
        match self {
            Lane::All => STATUS_CONSUMER.to_string(),
            Lane::Direct => DIRECT_CONSUMER.to_string(),
            Lane::Partition(p) => format!("{STATUS_CONSUMER}-{p}"),
        }
    }

    /// What comes before the run key in this lane's subjects.
    fn key_prefix(self, prefix: &str) -> String {
        match self {
            Lane::All | Lane::Direct => format!("{prefix}.status."),
            Lane::Partition(p) => format!("{prefix}.status.{p}."),
        }
    }

    /// The consumer's filter subject (none for [`Lane::All`]).
    fn filter(self, prefix: &str) -> Option<String> {
        match self {
            Lane::All => None,
            Lane::Direct => Some(format!("{prefix}.status.*")),
            Lane::Partition(p) => Some(format!("{prefix}.status.{p}.*")),
        }
    }
}

/// One status message as it arrived on `<prefix>.status.<key>`: the intake decodes and
/// checks it (with the same rules as the HTTP callback), not this crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusMessage {
    /// The subject it came on.
    pub subject: String,
    /// The run key it claims to be about: the subject's last token.
    pub key: String,
    /// The body.
    pub payload: Vec<u8>,
    /// Its W3C `traceparent` header, when the executor sent one (the report's place in a
    /// trace; see `kairos_core::trace`).
    pub traceparent: Option<String>,
    /// How many times the stream has delivered it, this time included (1 the first time).
    pub deliveries: i64,
}

/// What the handler made of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Recorded (or deliberately ignored): acknowledge.
    Done,
    /// Could not be recorded now: redeliver later (at most [`MAX_DELIVER`] deliveries).
    Retry,
    /// About a run the database does not show published (yet): redeliver after
    /// [`LATER`]. After a failover that lost the last commits, the run is planned and
    /// published again under its key (the stream drops the copy), and the report then
    /// applies.
    Later,
    /// Can never be recorded (broken rule, unknown or unpublished run): terminate, so it
    /// leaves the stream and never blocks the consumer.
    Refuse,
}

/// The wait before a [`Disposition::Later`] message is delivered again.
pub const LATER: Duration = Duration::from_secs(5);

/// Most messages handed to the handler at once.
pub const MAX_CHUNK: usize = 1_000;
/// Chunks the consumer hands over before it waits for the handler's answers: the next ones
/// are pulled and decoded while earlier ones are recorded. A chunk holds what had arrived
/// when it was taken, often a few dozen messages, so this is what lets the handler gather
/// batches of thousands under load.
pub const CHUNKS_IN_FLIGHT: usize = 32;
/// Messages one pull request asks for.
const PULL_BATCH: usize = 1_000;
/// Unacknowledged messages the server lets the consumer have, over every instance: enough
/// for every instance's chunks in flight, so a busy intake is never starved by the limit.
pub const MAX_ACK_PENDING: i64 = 20_000;

/// Deliveries of one status message before the server gives up on it: a report that fails
/// for a reason the handler did not foresee cannot loop forever and fill `max_ack_pending`.
pub const MAX_DELIVER: i64 = 20;

/// The durable consumer of status messages.
#[derive(Debug)]
pub struct StatusConsumer {
    consumer: jetstream::consumer::Consumer<pull::Config>,
    /// What comes before the run key in the subjects of its lane.
    key_prefix: String,
}

impl StatusConsumer {
    /// Creates (or updates) the launcher's status stream on `<prefix>.status.>`, with its
    /// replica count, and binds the durable consumer of `lane` (which follows the stream's
    /// replica count), first removing the consumers of the other kind (unfiltered or
    /// partitioned) that would overlap it.
    ///
    /// # Errors
    /// [`Error::StreamTaken`] when the stream exists with other subjects,
    /// [`Error::Replicas`] when the server refuses the replica count, [`Error::Stream`] when
    /// the stream or consumer cannot be created.
    pub async fn connect(launcher: &NatsLauncher, lane: Lane) -> Result<Self> {
        let stream = launcher.config().status_stream.as_str();
        let prefix = launcher.config().subject_prefix.as_str();
        let fail = |err: &dyn std::fmt::Display| Error::Stream {
            stream: stream.to_string(),
            reason: err.to_string(),
        };
        let config = stream::Config {
            name: stream.to_string(),
            description: Some(format!("kairos status reports ({prefix}.status.>)")),
            subjects: vec![format!("{prefix}.status.>")],
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            // The same replica count as the launch stream (`nats.replicas`), checked against
            // the cluster when the launcher connected.
            num_replicas: launcher.config().replicas,
            ..Default::default()
        };
        let js = launcher.jetstream();
        let stream_info = launcher.create_or_update(config).await?;
        let name = lane.consumer();
        let consumer = pull::Config {
            durable_name: Some(name.clone()),
            filter_subject: lane.filter(prefix).unwrap_or_default(),
            ack_policy: AckPolicy::Explicit,
            ack_wait: Duration::from_secs(30),
            max_deliver: MAX_DELIVER,
            max_ack_pending: MAX_ACK_PENDING,
            ..Default::default()
        };
        let stream_handle = js
            .get_stream(&stream_info.config.name)
            .await
            .map_err(|e| fail(&e))?;
        remove_overlapping(&stream_handle, lane)
            .await
            .map_err(|e| fail(&e))?;
        let mut existing: jetstream::consumer::Consumer<pull::Config> = stream_handle
            .get_or_create_consumer(&name, consumer.clone())
            .await
            .map_err(|e| fail(&e))?;
        // A consumer created by an older build keeps its old limits: bring it up to date.
        let info = existing.info().await.map_err(|e| fail(&e))?;
        if info.config.max_deliver != MAX_DELIVER || info.config.max_ack_pending != MAX_ACK_PENDING
        {
            existing = stream_handle
                .update_consumer(consumer)
                .await
                .map_err(|e| fail(&e))?;
        }
        let consumer = existing;
        Ok(StatusConsumer {
            consumer,
            key_prefix: lane.key_prefix(prefix),
        })
    }

    /// Hands every status message to `handle`, in chunks of whatever has arrived (at most
    /// [`MAX_CHUNK`], [`CHUNKS_IN_FLIGHT`] at once), until `shutdown` resolves. `handle`
    /// answers one [`Disposition`] per message, in order. Broken connections are retried;
    /// the function returns only on shutdown.
    ///
    /// # Errors
    /// Never, today; the `Result` leaves room for a fatal consumer error.
    pub async fn run<H, F>(&self, handle: H, shutdown: impl Future<Output = ()>) -> Result<()>
    where
        H: Fn(Vec<StatusMessage>) -> F,
        F: Future<Output = Vec<Disposition>>,
    {
        tokio::pin!(shutdown);
        loop {
            let pulled = self
                .consumer
                .stream()
                .max_messages_per_batch(PULL_BATCH)
                .heartbeat(Duration::from_secs(5))
                .expires(Duration::from_secs(10))
                .messages()
                .await;
            let messages = match pulled {
                Ok(messages) => messages,
                Err(err) => {
                    tracing::warn!(error = %err, "status consumer: cannot pull; retrying");
                    tokio::select! {
                        () = &mut shutdown => return Ok(()),
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            };
            let delivered = messages
                .filter_map(|next| async move {
                    next.map_err(|err| tracing::warn!(error = %err, "status consumer: pull failed"))
                        .ok()
                })
                .ready_chunks(MAX_CHUNK)
                .for_each_concurrent(CHUNKS_IN_FLIGHT, |chunk| self.deliver(chunk, &handle));
            tokio::select! {
                () = &mut shutdown => return Ok(()),
                () = delivered => {}
            }
        }
    }

    async fn deliver<H, F>(&self, messages: Vec<jetstream::Message>, handle: &H)
    where
        H: Fn(Vec<StatusMessage>) -> F,
        F: Future<Output = Vec<Disposition>>,
    {
        let prefix = self.key_prefix.as_str();
        let statuses = messages
            .iter()
            .map(|message| {
                let subject = message.subject.to_string();
                StatusMessage {
                    key: run_key(subject.strip_prefix(prefix).unwrap_or_default()),
                    subject,
                    payload: message.payload.to_vec(),
                    traceparent: message
                        .headers
                        .as_ref()
                        .and_then(|headers| headers.get("traceparent"))
                        .map(|value| value.as_str().to_string()),
                    deliveries: message.info().map_or(1, |info| info.delivered),
                }
            })
            .collect();
        let dispositions = handle(statuses).await;
        for (message, disposition) in messages.iter().zip(dispositions) {
            let kind = match disposition {
                Disposition::Done => AckKind::Ack,
                Disposition::Retry => AckKind::Nak(Some(Duration::from_secs(1))),
                Disposition::Later => AckKind::Nak(Some(LATER)),
                Disposition::Refuse => AckKind::Term,
            };
            if let Err(err) = message.ack_with(kind).await {
                tracing::warn!(error = %err, subject = %message.subject, "status message: ack failed");
            }
        }
    }
}

/// The run key of a subject's tokens after `<prefix>.status.` (or after the partition's
/// token): the whole rest, or, where the server mapped the subject onto a partition that
/// this lane reads unfiltered, what follows the partition's number (a run key has no dot).
fn run_key(rest: &str) -> String {
    match rest.split_once('.') {
        Some((partition, key))
            if !partition.is_empty() && partition.bytes().all(|b| b.is_ascii_digit()) =>
        {
            key.to_string()
        }
        _ => rest.to_string(),
    }
}

/// Deletes the stream's consumers that a consumer of `lane` would overlap: for
/// [`Lane::All`] the partitioned ones (named `kairos-status-...`); for a partitioned lane
/// the unfiltered [`STATUS_CONSUMER`].
async fn remove_overlapping(
    stream: &jetstream::stream::Stream,
    lane: Lane,
) -> std::result::Result<(), String> {
    let names: Vec<String> = stream
        .consumer_names()
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<std::result::Result<_, _>>()
        .map_err(|err| err.to_string())?;
    for name in names {
        let overlaps = match lane {
            Lane::All => name.starts_with(&format!("{STATUS_CONSUMER}-")),
            Lane::Direct | Lane::Partition(_) => name == STATUS_CONSUMER,
        };
        if overlaps {
            tracing::info!(consumer = %name, ?lane, "status stream: removing an overlapping consumer");
            if let Err(err) = stream.delete_consumer(&name).await {
                tracing::warn!(error = %err, consumer = %name, "status stream: cannot remove consumer");
            }
        }
    }
    Ok(())
}

/// Publishes a status body on `<prefix>.status.<key>` and awaits the stream's ack (what an
/// executor does; used by tests).
///
/// # Errors
/// [`Error::Publish`] when it is not stored.
pub async fn publish_status(
    launcher: &NatsLauncher,
    prefix: &str,
    key: &str,
    body: &serde_json::Value,
) -> Result<()> {
    let body = serde_json::to_vec(body).expect("JSON values always serialize");
    let subject = format!("{prefix}.status.{key}");
    let publish = |err: &dyn std::fmt::Display| Error::Publish {
        reason: err.to_string(),
    };
    launcher
        .jetstream()
        .publish(subject, body.into())
        .await
        .map_err(|e| publish(&e))?
        .await
        .map_err(|e| publish(&e))?;
    Ok(())
}

impl NatsLauncher {
    /// Readiness: JetStream answers for the launch stream within `timeout`.
    ///
    /// # Errors
    /// [`Error::Stream`] or [`Error::Publish`] naming why it did not.
    pub async fn ready(&self, timeout: Duration) -> Result<()> {
        match tokio::time::timeout(timeout, self.stream_messages()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(err)) => Err(err),
            Err(_) => Err(Error::Publish {
                reason: format!("jetstream did not answer within {timeout:?}"),
            }),
        }
    }
}

/// One message stored in a stream, as an operator or a test reads it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Stream sequence.
    pub sequence: u64,
    /// Its `Nats-Msg-Id` header, if any.
    pub msg_id: Option<String>,
    /// The subject it was published on.
    pub subject: String,
    /// The body.
    pub payload: Vec<u8>,
}

/// Reads every message of `stream` in sequence order (for checks and tests; one request
/// per message, so meant for small streams). A message removed while it reads (a work queue
/// being consumed) is left out.
///
/// # Errors
/// [`Error::Stream`] when the stream or a message cannot be read.
pub async fn read_stream(launcher: &NatsLauncher, stream: &str) -> Result<Vec<Stored>> {
    let fail = |err: &dyn std::fmt::Display| Error::Stream {
        stream: stream.to_string(),
        reason: err.to_string(),
    };
    let mut handle = launcher
        .jetstream()
        .get_stream(stream)
        .await
        .map_err(|e| fail(&e))?;
    let state = handle.info().await.map_err(|e| fail(&e))?.state.clone();
    let mut stored = Vec::with_capacity(state.messages as usize);
    if state.messages == 0 {
        return Ok(stored);
    }
    for sequence in state.first_sequence..=state.last_sequence {
        let message = match handle.get_raw_message(sequence).await {
            Ok(message) => message,
            // Gone since the stream's state was read (a work queue acknowledged it, or a
            // limit removed it): it is no longer stored.
            Err(err) if err.kind() == stream::RawMessageErrorKind::NoMessageFound => continue,
            Err(err) => return Err(fail(&err)),
        };
        stored.push(Stored {
            sequence,
            msg_id: message
                .headers
                .get("Nats-Msg-Id")
                .map(|value| value.as_str().to_string()),
            subject: message.subject.to_string(),
            payload: message.payload.to_vec(),
        });
    }
    Ok(stored)
}

#[cfg(test)]
mod tests {
    use super::run_key;

    #[test]
    fn the_run_key_is_what_follows_the_prefix_or_the_partition() {
        assert_eq!(run_key("abc-1"), "abc-1");
        assert_eq!(run_key("7.abc-1"), "abc-1");
        assert_eq!(
            run_key("a.b"),
            "a.b",
            "not a partition: left for the intake to refuse"
        );
        assert_eq!(run_key(""), "");
    }
}
