//! [`NatsLauncher`]: launch messages on JetStream.
//!
//! - The deployment's streams (named from `nats.stream_prefix`, see [`crate::streams`]) are
//!   created or updated on connect, with the duplicate window from config. The window must
//!   exceed the longest gap between a publish and its retry; a retry inside it is
//!   acknowledged `duplicate`.
//! - A batch is pipelined: up to `max_inflight` messages are awaiting their acknowledgement
//!   at once (back-pressure), and acknowledgements are collected while later messages are
//!   sent, so callers sharing the limit never wait on each other. Only the acknowledgements
//!   in flight are futures; the rest of the batch waits in a plain loop.
//! - `replicas` (1 or 3) applies to the launch, dead-letter and status streams. With more
//!   than one, the cluster is checked before any stream is created (see [`crate::replicas`]).
//! - A timeout does not mean the message was not stored: callers retry with the same
//!   `Nats-Msg-Id`, and a `duplicate` acknowledgement counts as success.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::{self, stream};
use futures::stream::FuturesOrdered;
use futures::StreamExt;

use crate::events::{self, Event};
use crate::spans::Publishing;
use crate::streams::Retention;
use crate::{CancelMessage, DeadLetter, Enqueued, Error, LaunchMessage, Result, RunLauncher};

/// How to reach NATS and shape the stream. Fields mirror the `[nats]` config section.
#[derive(Debug, Clone)]
pub struct NatsConfig {
    /// Server URL, e.g. `nats://127.0.0.1:4222`, or several comma-separated (a cluster).
    pub url: String,
    /// Launch stream name (`<stream_prefix>_LAUNCH`, subjects `<prefix>.launch.>`).
    pub stream: String,
    /// Status stream name (`<stream_prefix>_STATUS`, subjects `<prefix>.status.>`).
    pub status_stream: String,
    /// Dead-letter stream name (`<stream_prefix>_DLQ`, subjects `<prefix>.dlq.>`).
    pub dlq_stream: String,
    /// Cancel stream name (`<stream_prefix>_CANCEL`, subjects `<prefix>.cancel.>`).
    pub cancel_stream: String,
    /// How long and how much the launch stream keeps.
    pub launch_retention: Retention,
    /// How long and how much the dead-letter stream keeps.
    pub dlq_retention: Retention,
    /// Subject prefix (`kairos`); launch messages go to `<prefix>.launch.<workflow_id>`.
    pub subject_prefix: String,
    /// How long the stream remembers message ids for de-duplication.
    pub duplicate_window: Duration,
    /// Most acknowledgements awaited at once; publishing waits beyond it.
    pub max_inflight: usize,
    /// How long to wait for one acknowledgement.
    pub ack_timeout: Duration,
    /// Copies of each stream (launch, dead-letter and status) the cluster keeps: 1, or 3 on
    /// a cluster of at least 3 JetStream servers.
    pub replicas: usize,
    /// CA certificate to trust (TLS).
    pub tls_ca: Option<PathBuf>,
    /// Client certificate and key (mutual TLS).
    pub tls_client: Option<(PathBuf, PathBuf)>,
    /// A `.creds` file (JWT + nkey).
    pub creds_file: Option<PathBuf>,
    /// User and password.
    pub user_password: Option<(String, String)>,
    /// Token authentication.
    pub token: Option<String>,
    /// Every region of the deployment (`nats.regions`): each has its own launch stream,
    /// placed on the cluster of that name ([`crate::regions`]). Empty: no regions.
    pub regions: Vec<String>,
    /// Partitions of the status stream (`nats.status_partitions`); each launch message names
    /// the status subject of its run's partition ([`crate::status::status_subject`]).
    pub status_partitions: u16,
}

impl NatsConfig {
    /// The defaults of `config/default.toml` for a server at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        let mut config = NatsConfig {
            url: url.into(),
            stream: String::new(),
            status_stream: String::new(),
            dlq_stream: String::new(),
            cancel_stream: String::new(),
            launch_retention: Retention::LAUNCH,
            dlq_retention: Retention::DEAD_LETTERS,
            subject_prefix: "kairos".into(),
            duplicate_window: Duration::from_secs(900),
            max_inflight: 4_096,
            ack_timeout: Duration::from_secs(5),
            replicas: 1,
            tls_ca: None,
            tls_client: None,
            creds_file: None,
            user_password: None,
            token: None,
            regions: Vec::new(),
            status_partitions: 16,
        };
        config.name_streams(crate::streams::DEFAULT_PREFIX);
        config
    }

    /// Where this deployment's launch messages tell executors to report.
    #[must_use]
    pub fn status_subjects(&self) -> crate::status::StatusSubjects {
        crate::status::StatusSubjects {
            prefix: self.subject_prefix.clone(),
            partitions: self.status_partitions,
        }
    }

    /// Names the four streams `<prefix>_LAUNCH`, `<prefix>_STATUS`, `<prefix>_DLQ` and
    /// `<prefix>_CANCEL`: one deployment's streams, apart from any other's on the server.
    pub fn name_streams(&mut self, prefix: &str) {
        self.stream = format!("{prefix}_LAUNCH");
        self.status_stream = format!("{prefix}_STATUS");
        self.dlq_stream = format!("{prefix}_DLQ");
        self.cancel_stream = format!("{prefix}_CANCEL");
    }
}

/// Publishes launch messages to JetStream.
#[derive(Debug, Clone)]
pub struct NatsLauncher {
    jetstream: jetstream::Context,
    config: NatsConfig,
}

impl NatsLauncher {
    /// Connects and creates (or updates) the stream.
    ///
    /// # Errors
    /// [`Error::Connect`] when the server cannot be reached, [`Error::Credentials`] for an
    /// unreadable creds file, [`Error::Replicas`] when the cluster has fewer servers than
    /// `replicas`, [`Error::Stream`] when the stream cannot be created or updated.
    pub async fn connect(config: NatsConfig) -> Result<Self> {
        // `url` may list a cluster's servers, comma-separated: each is a seed to try.
        let seeds: Vec<&str> = config.url.split(',').map(str::trim).collect();
        let client = async_nats::connect_with_options(seeds, connect_options(&config).await?)
            .await
            .map_err(|source| Error::Connect {
                url: config.url.clone(),
                source,
            })?;
        let jetstream = jetstream::ContextBuilder::new()
            .ack_timeout(config.ack_timeout)
            .max_ack_inflight(config.max_inflight)
            .backpressure_on_inflight(true)
            .build(client);
        let launcher = NatsLauncher { jetstream, config };
        crate::replicas::check(&launcher).await?;
        launcher.ensure_stream().await?;
        Ok(launcher)
    }

    /// The settings this launcher was connected with.
    pub fn config(&self) -> &NatsConfig {
        &self.config
    }

    /// How many messages the stream holds now.
    ///
    /// # Errors
    /// [`Error::Stream`] when the stream cannot be read.
    pub async fn stream_messages(&self) -> Result<u64> {
        let mut stream = self
            .jetstream
            .get_stream(&self.config.stream)
            .await
            .map_err(|err| self.stream_error(err))?;
        let info = stream.info().await.map_err(|err| self.stream_error(err))?;
        Ok(info.state.messages)
    }

    /// The largest message the connected server accepts (its `max_payload`), for the
    /// registrar's DAG limit.
    pub fn max_payload(&self) -> usize {
        self.jetstream.client().server_info().max_payload
    }

    /// The JetStream context, for consumers built on the same connection.
    pub fn jetstream(&self) -> &jetstream::Context {
        &self.jetstream
    }

    fn stream_error(&self, err: impl std::fmt::Display) -> Error {
        Error::Stream {
            stream: self.config.stream.clone(),
            reason: err.to_string(),
        }
    }

    /// Sends one message; the returned future resolves when it is acknowledged.
    async fn stage(&self, message: Outgoing) -> Result<jetstream::context::PublishAckFuture> {
        let size = message.body.len();
        let publish = PublishMessage::build()
            .payload(message.body.into())
            .headers(message.headers);
        self.jetstream
            .send_publish(message.subject, publish)
            .await
            .map_err(|err| match err.kind() {
                PublishErrorKind::MaxPayloadExceeded => Error::TooLarge { size },
                _ => Error::Publish {
                    reason: err.to_string(),
                },
            })
    }
}

/// One message to publish: where, its headers (`Nats-Msg-Id`, the de-duplication id, among
/// them), what.
#[derive(Debug)]
struct Outgoing {
    subject: String,
    headers: async_nats::HeaderMap,
    body: Vec<u8>,
}

impl RunLauncher for NatsLauncher {
    async fn launch(&self, batch: &[LaunchMessage]) -> Vec<Result<Enqueued>> {
        let prefix = &self.config.subject_prefix;
        let outgoing = batch.iter().map(|message| Outgoing {
            subject: message.subject(prefix),
            headers: launch_event(message).headers(prefix, &message.msg_id()),
            body: message.encode_reporting_on(&self.status_subject(message)),
        });
        let publishing = Publishing::start();
        let outcomes = self.publish(outgoing).await;
        if let Some(publishing) = publishing {
            let ids: Vec<String> = batch.iter().map(LaunchMessage::msg_id).collect();
            let messages = batch.iter().zip(ids.iter().map(String::as_str));
            publishing.finished(messages, &outcomes, prefix);
        }
        outcomes
    }

    async fn redeliver(&self, batch: &[(LaunchMessage, String)]) -> Vec<Result<Enqueued>> {
        let prefix = &self.config.subject_prefix;
        let outgoing = batch.iter().map(|(message, msg_id)| Outgoing {
            subject: message.subject(prefix),
            headers: launch_event(message).headers(prefix, msg_id),
            body: message.encode_reporting_on(&self.status_subject(message)),
        });
        let publishing = Publishing::start();
        let outcomes = self.publish(outgoing).await;
        if let Some(publishing) = publishing {
            let messages = batch.iter().map(|(message, id)| (message, id.as_str()));
            publishing.finished(messages, &outcomes, prefix);
        }
        outcomes
    }

    async fn is_stored(&self, region: Option<&str>, sequence: u64) -> Result<bool> {
        let name = match region {
            Some(region) => crate::regions::region_stream(&self.config.stream, region),
            None => self.config.stream.clone(),
        };
        let stream = self
            .jetstream
            .get_stream(&name)
            .await
            .map_err(|err| self.stream_error(err))?;
        match stream.get_raw_message(sequence).await {
            Ok(_) => Ok(true),
            Err(err) if err.kind() == stream::RawMessageErrorKind::NoMessageFound => Ok(false),
            Err(err) => Err(self.stream_error(err)),
        }
    }

    async fn region_ready(&self, region: &str) -> bool {
        self.probe_region(region).await
    }

    async fn cancel(&self, batch: &[CancelMessage]) -> Vec<Result<Enqueued>> {
        let prefix = &self.config.subject_prefix;
        let outgoing = batch.iter().map(|cancel| {
            let event = Event {
                kind: events::CANCEL,
                schedule_id: &cancel.schedule_id,
                key: &cancel.idempotency_key,
                time: &cancel.requested_at,
            };
            Outgoing {
                subject: cancel.subject(prefix),
                headers: event.headers(prefix, &cancel.msg_id()),
                body: cancel.encode(),
            }
        });
        self.publish(outgoing).await
    }

    async fn dead_letter(&self, batch: &[DeadLetter]) -> Vec<Result<Enqueued>> {
        let prefix = &self.config.subject_prefix;
        let outgoing = batch.iter().map(|letter| {
            let event = Event {
                kind: events::DEAD_LETTER,
                ..launch_event(&letter.launch)
            };
            Outgoing {
                subject: letter.subject(prefix),
                headers: event.headers(prefix, &letter.msg_id()),
                body: letter.encode(),
            }
        });
        self.publish(outgoing).await
    }
}

/// The CloudEvents attributes of a launch message: its schedule, its key, its tick.
fn launch_event(message: &LaunchMessage) -> Event<'_> {
    Event {
        kind: events::LAUNCH,
        schedule_id: &message.schedule_id,
        key: &message.idempotency_key,
        time: &message.scheduled_for,
    }
}

impl NatsLauncher {
    /// Where the executor of `message` reports its run's status.
    fn status_subject(&self, message: &LaunchMessage) -> String {
        crate::status::status_subject(
            &self.config.subject_prefix,
            &message.idempotency_key,
            self.config.status_partitions,
        )
    }

    /// Publishes a batch, pipelined: messages are sent one after another, each taking one of
    /// the context's `max_inflight` permits (waiting when none is free), while the
    /// acknowledgements of those already sent are collected, which frees their permits.
    /// Outcomes come back in batch order. Each message is encoded just before it is sent (the
    /// batch is an iterator), so a batch never holds every body at once.
    ///
    /// Invariant: a caller never holds permits while it waits for more without also
    /// collecting its own acknowledgements. Sending a whole chunk before awaiting any
    /// acknowledgement did not, and two callers sharing the context's permits (two dispatch
    /// lanes with batches over half the limit) each held part of them and waited for the
    /// rest until the caller's launch timeout.
    async fn publish(
        &self,
        batch: impl ExactSizeIterator<Item = Outgoing>,
    ) -> Vec<Result<Enqueued>> {
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut acks = FuturesOrdered::new();
        for message in batch {
            let staged = self.stage(message);
            tokio::pin!(staged);
            // Acknowledgements already in are taken first, so each is timed when it arrives
            // rather than once the whole batch is sent.
            let staged = loop {
                tokio::select! {
                    biased;
                    Some(outcome) = acks.next(), if !acks.is_empty() => outcomes.push(outcome),
                    staged = &mut staged => break staged,
                }
            };
            acks.push_back(acknowledged(staged));
        }
        while let Some(outcome) = acks.next().await {
            outcomes.push(outcome);
        }
        outcomes
    }
}

/// The outcome of a staged message once its acknowledgement is in (or the staging error).
async fn acknowledged(staged: Result<jetstream::context::PublishAckFuture>) -> Result<Enqueued> {
    let ack = staged?.await.map_err(|err| Error::Publish {
        reason: err.to_string(),
    })?;
    Ok(Enqueued {
        stream_sequence: ack.sequence,
        duplicate: ack.duplicate,
        acked_at: Instant::now(),
    })
}

async fn connect_options(config: &NatsConfig) -> Result<async_nats::ConnectOptions> {
    let mut options = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(5))
        .name("kairos");
    if let Some(path) = &config.creds_file {
        options = options
            .credentials_file(path)
            .await
            .map_err(|source| Error::Credentials {
                path: path.display().to_string(),
                source,
            })?;
    }
    if let Some((user, password)) = &config.user_password {
        options = options.user_and_password(user.clone(), password.clone());
    }
    if let Some(token) = &config.token {
        options = options.token(token.clone());
    }
    if let Some(ca) = &config.tls_ca {
        options = options.add_root_certificates(ca.clone()).require_tls(true);
    }
    if let Some((cert, key)) = &config.tls_client {
        options = options
            .add_client_certificate(cert.clone(), key.clone())
            .require_tls(true);
    }
    Ok(options)
}
