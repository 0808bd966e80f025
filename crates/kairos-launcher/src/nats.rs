//! [`NatsLauncher`]: launch messages on JetStream.
//!
//! - The stream (`KAIROS_LAUNCH`, subjects `<prefix>.launch.>`, file storage), the
//!   dead-letter stream (`KAIROS_DLQ`, `<prefix>.dlq.>`) and the cancel stream
//!   (`KAIROS_CANCEL`, `<prefix>.cancel.>`, kept a day) are created or updated on connect,
//!   with the duplicate window from config. The window must exceed the longest
//!   gap between a publish and its retry; a retry inside it is acknowledged `duplicate`.
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

use crate::{CancelMessage, DeadLetter, Enqueued, Error, LaunchMessage, Result, RunLauncher};

/// How long the cancel stream keeps a cancel request.
const CANCEL_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// How to reach NATS and shape the stream. Fields mirror the `[nats]` config section.
#[derive(Debug, Clone)]
pub struct NatsConfig {
    /// Server URL, e.g. `nats://127.0.0.1:4222`, or several comma-separated (a cluster).
    pub url: String,
    /// Stream name (`KAIROS_LAUNCH`).
    pub stream: String,
    /// Dead-letter stream name (`KAIROS_DLQ`, subjects `<prefix>.dlq.>`).
    pub dlq_stream: String,
    /// Cancel stream name (`KAIROS_CANCEL`, subjects `<prefix>.cancel.>`).
    pub cancel_stream: String,
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
}

impl NatsConfig {
    /// The defaults of `config/default.toml` for a server at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        NatsConfig {
            url: url.into(),
            stream: "KAIROS_LAUNCH".into(),
            dlq_stream: "KAIROS_DLQ".into(),
            cancel_stream: "KAIROS_CANCEL".into(),
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
        }
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

    /// Creates the launch and dead-letter streams, or brings existing ones to the configured
    /// subjects, window and replica count.
    ///
    /// # Errors
    /// [`Error::Replicas`] when the server refuses the replica count, [`Error::Stream`] with
    /// the server's reason otherwise.
    pub async fn ensure_stream(&self) -> Result<()> {
        let prefix = &self.config.subject_prefix;
        // Cancel requests matter only while their run may still be going: they expire after
        // a day instead of accumulating.
        for (name, subjects, max_age) in [
            (&self.config.stream, format!("{prefix}.launch.>"), None),
            (&self.config.dlq_stream, format!("{prefix}.dlq.>"), None),
            (
                &self.config.cancel_stream,
                format!("{prefix}.cancel.>"),
                Some(CANCEL_MAX_AGE),
            ),
        ] {
            let config = stream::Config {
                name: name.clone(),
                subjects: vec![subjects],
                duplicate_window: self.config.duplicate_window,
                storage: stream::StorageType::File,
                num_replicas: self.config.replicas,
                max_age: max_age.unwrap_or_default(),
                ..Default::default()
            };
            self.create_or_update(config).await?;
        }
        Ok(())
    }

    /// Creates stream `config.name`, or updates it to `config`, and checks that the server
    /// kept the replica count asked for.
    ///
    /// An existing stream with another replica count is updated in place: a clustered
    /// NATS server (2.9 and later) lets an update change `num_replicas`, adding peers (which
    /// catch up from the leader) or removing them, while the stream stays available. A
    /// single server refuses more than one replica when a stream is created but may accept
    /// it silently on update, which is why [`crate::replicas::check`] runs first and the
    /// answer is checked here.
    pub(crate) async fn create_or_update(&self, config: stream::Config) -> Result<stream::Info> {
        let name = config.name.clone();
        let asked = config.num_replicas;
        let info = self
            .jetstream
            .create_or_update_stream(config)
            .await
            .map_err(|err| crate::replicas::create_error(&name, asked, err))?;
        if info.config.num_replicas.max(1) != asked.max(1) {
            return Err(Error::Replicas {
                asked,
                reported: format!(
                    "stream {name:?} was left with {} replica(s)",
                    info.config.num_replicas
                ),
            });
        }
        Ok(info)
    }

    /// The settings this launcher was connected with.
    pub(crate) fn config(&self) -> &NatsConfig {
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
            .message_id(message.msg_id);
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

/// One message to publish: where, under which de-duplication id, what.
#[derive(Debug)]
struct Outgoing {
    subject: String,
    msg_id: String,
    body: Vec<u8>,
}

impl RunLauncher for NatsLauncher {
    async fn launch(&self, batch: &[LaunchMessage]) -> Vec<Result<Enqueued>> {
        let prefix = &self.config.subject_prefix;
        let outgoing = batch.iter().map(|message| Outgoing {
            subject: message.subject(prefix),
            msg_id: message.msg_id(),
            body: message.encode(),
        });
        self.publish(outgoing).await
    }

    async fn redeliver(&self, batch: &[(LaunchMessage, String)]) -> Vec<Result<Enqueued>> {
        let prefix = &self.config.subject_prefix;
        let outgoing = batch.iter().map(|(message, msg_id)| Outgoing {
            subject: message.subject(prefix),
            msg_id: msg_id.clone(),
            body: message.encode(),
        });
        self.publish(outgoing).await
    }

    async fn is_stored(&self, sequence: u64) -> Result<bool> {
        let stream = self
            .jetstream
            .get_stream(&self.config.stream)
            .await
            .map_err(|err| self.stream_error(err))?;
        match stream.get_raw_message(sequence).await {
            Ok(_) => Ok(true),
            Err(err) if err.kind() == stream::RawMessageErrorKind::NoMessageFound => Ok(false),
            Err(err) => Err(self.stream_error(err)),
        }
    }

    async fn cancel(&self, batch: &[CancelMessage]) -> Vec<Result<Enqueued>> {
        let prefix = &self.config.subject_prefix;
        let outgoing = batch.iter().map(|cancel| Outgoing {
            subject: cancel.subject(prefix),
            msg_id: cancel.msg_id(),
            body: cancel.encode(),
        });
        self.publish(outgoing).await
    }

    async fn dead_letter(&self, batch: &[DeadLetter]) -> Vec<Result<Enqueued>> {
        let prefix = &self.config.subject_prefix;
        let outgoing = batch.iter().map(|letter| Outgoing {
            subject: letter.subject(prefix),
            msg_id: letter.msg_id(),
            body: letter.encode(),
        });
        self.publish(outgoing).await
    }
}

impl NatsLauncher {
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
