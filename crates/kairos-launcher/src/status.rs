//! Status intake over NATS: executors publish the status callback body
//! (`schemas/status.schema.json`, with `idempotency_key`) on
//! `<prefix>.status.<idempotency_key>`; [`StatusConsumer`] reads them from stream
//! `KAIROS_STATUS` through one durable pull consumer shared by every kairos instance, hands
//! each decoded [`StatusEvent`] to a handler, and acknowledges it when the handler says so.
//!
//! The stream is a work queue: a message leaves it once acknowledged. A message that does
//! not decode is terminated (logged, never redelivered); a handler that cannot record a
//! report now (database down) asks for redelivery.

use std::future::Future;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy};
use async_nats::jetstream::{self, stream, AckKind};
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::{Error, NatsLauncher, Result};

/// The status stream's default name.
pub const STATUS_STREAM: &str = "KAIROS_STATUS";
/// The durable consumer every instance shares.
pub const STATUS_CONSUMER: &str = "kairos-status";

/// What an executor reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum ReportedStatus {
    /// The run began.
    Started,
    /// The run ended well.
    Success,
    /// The run ended badly.
    Failed,
}

/// One status message (the HTTP callback body plus `idempotency_key`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusEvent {
    /// The run's key.
    pub idempotency_key: String,
    /// The new status.
    pub status: ReportedStatus,
    /// The executor's run id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The reporting executor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_id: Option<String>,
    /// Why the run failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why a status message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("status message on {subject:?} refused: {reason}")]
pub struct DecodeError {
    /// The subject it came on.
    pub subject: String,
    /// The rule it broke.
    pub reason: String,
}

/// Whether a key is a valid id (`^[A-Za-z0-9_-]{1,200}$`), hence a subject token.
pub fn valid_key(key: &str) -> bool {
    (1..=200).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl StatusEvent {
    /// Decodes and checks a message from `<prefix>.status.<key>` against the status schema.
    ///
    /// # Errors
    /// [`DecodeError`] naming the rule broken.
    pub fn decode(prefix: &str, subject: &str, payload: &[u8]) -> Result<Self, DecodeError> {
        let refuse = |reason: String| DecodeError {
            subject: subject.to_string(),
            reason,
        };
        let event: StatusEvent =
            serde_json::from_slice(payload).map_err(|err| refuse(err.to_string()))?;
        if !valid_key(&event.idempotency_key) {
            return Err(refuse(
                "idempotency_key must match ^[A-Za-z0-9_-]{1,200}$".into(),
            ));
        }
        let expected = format!("{prefix}.status.{}", event.idempotency_key);
        if subject != expected {
            return Err(refuse(format!("the subject must be {expected:?}")));
        }
        for (field, value, max) in [
            ("run_id", &event.run_id, 200),
            ("executor_id", &event.executor_id, 200),
            ("error", &event.error, 8192),
        ] {
            if let Some(value) = value {
                if (field != "error" && value.is_empty()) || value.len() > max {
                    return Err(refuse(format!("{field} must be 1 to {max} characters")));
                }
            }
        }
        Ok(event)
    }
}

/// What the handler made of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Recorded (or deliberately ignored): acknowledge.
    Done,
    /// Could not be recorded now: redeliver later.
    Retry,
}

/// The durable consumer of status messages.
#[derive(Debug)]
pub struct StatusConsumer {
    consumer: jetstream::consumer::Consumer<pull::Config>,
    prefix: String,
}

impl StatusConsumer {
    /// Creates (or updates) stream `stream` on `<prefix>.status.>` and binds the durable
    /// consumer [`STATUS_CONSUMER`].
    ///
    /// # Errors
    /// [`Error::Stream`] when the stream or consumer cannot be created.
    pub async fn connect(launcher: &NatsLauncher, stream: &str, prefix: &str) -> Result<Self> {
        let fail = |err: &dyn std::fmt::Display| Error::Stream {
            stream: stream.to_string(),
            reason: err.to_string(),
        };
        let config = stream::Config {
            name: stream.to_string(),
            subjects: vec![format!("{prefix}.status.>")],
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            ..Default::default()
        };
        let js = launcher.jetstream();
        let stream_handle = js
            .create_or_update_stream(config)
            .await
            .map_err(|e| fail(&e))?;
        let consumer = pull::Config {
            durable_name: Some(STATUS_CONSUMER.into()),
            ack_policy: AckPolicy::Explicit,
            ack_wait: Duration::from_secs(30),
            ..Default::default()
        };
        let consumer = js
            .get_stream(&stream_handle.config.name)
            .await
            .map_err(|e| fail(&e))?
            .get_or_create_consumer(STATUS_CONSUMER, consumer)
            .await
            .map_err(|e| fail(&e))?;
        Ok(StatusConsumer {
            consumer,
            prefix: prefix.to_string(),
        })
    }

    /// Hands every status message to `handle` until `shutdown` resolves. Broken
    /// connections are retried; the function returns only on shutdown.
    ///
    /// # Errors
    /// Never, today; the `Result` leaves room for a fatal consumer error.
    pub async fn run<H, F>(&self, handle: H, shutdown: impl Future<Output = ()>) -> Result<()>
    where
        H: Fn(StatusEvent) -> F,
        F: Future<Output = Disposition>,
    {
        tokio::pin!(shutdown);
        loop {
            let mut messages = match self.consumer.messages().await {
                Ok(messages) => messages,
                Err(err) => {
                    tracing::warn!(error = %err, "status consumer: cannot pull; retrying");
                    tokio::select! {
                        () = &mut shutdown => return Ok(()),
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            };
            loop {
                let next = tokio::select! {
                    () = &mut shutdown => return Ok(()),
                    next = messages.next() => next,
                };
                match next {
                    Some(Ok(message)) => self.deliver(message, &handle).await,
                    Some(Err(err)) => {
                        tracing::warn!(error = %err, "status consumer: pull failed");
                    }
                    None => break,
                }
            }
        }
    }

    async fn deliver<H, F>(&self, message: jetstream::Message, handle: &H)
    where
        H: Fn(StatusEvent) -> F,
        F: Future<Output = Disposition>,
    {
        let subject = message.subject.to_string();
        let kind = match StatusEvent::decode(&self.prefix, &subject, &message.payload) {
            Err(err) => {
                tracing::warn!(error = %err, "status message dropped");
                AckKind::Term
            }
            Ok(event) => match handle(event).await {
                Disposition::Done => AckKind::Ack,
                Disposition::Retry => AckKind::Nak(Some(Duration::from_secs(1))),
            },
        };
        if let Err(err) = message.ack_with(kind).await {
            tracing::warn!(error = %err, subject = %subject, "status message: ack failed");
        }
    }
}

/// Publishes a status event on `<prefix>.status.<key>` and awaits the stream's ack (what an
/// executor does; used by tests and the example executor).
///
/// # Errors
/// [`Error::Publish`] when it is not stored.
pub async fn publish_status(
    launcher: &NatsLauncher,
    prefix: &str,
    event: &StatusEvent,
) -> Result<()> {
    let body = serde_json::to_vec(event).expect("status events always serialize");
    let subject = format!("{prefix}.status.{}", event.idempotency_key);
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
    /// The body.
    pub payload: Vec<u8>,
}

/// Reads every message of `stream` in sequence order (for checks and tests; one request
/// per message, so meant for small streams).
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
        let message = handle
            .get_raw_message(sequence)
            .await
            .map_err(|e| fail(&e))?;
        stored.push(Stored {
            sequence,
            msg_id: message
                .headers
                .get("Nats-Msg-Id")
                .map(|value| value.as_str().to_string()),
            payload: message.payload.to_vec(),
        });
    }
    Ok(stored)
}
