//! Errors of the launcher, split into retryable (try again with the same message id) and
//! permanent (the run cannot be launched as it is).

/// Result with the launcher's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a message was not stored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Could not connect to NATS.
    #[error("connect to nats at {url} failed")]
    Connect {
        /// The server URL.
        url: String,
        /// The cause.
        #[source]
        source: async_nats::ConnectError,
    },
    /// Could not read the TLS or credentials files named in config.
    #[error("nats credentials file {path:?} could not be read")]
    Credentials {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Creating or checking the stream failed.
    #[error("jetstream stream {stream:?} could not be created or checked: {reason}")]
    Stream {
        /// The stream name.
        stream: String,
        /// What went wrong.
        reason: String,
    },
    /// A stream of this deployment's name exists with other subjects: it belongs to another
    /// deployment sharing the server, or this deployment's `nats.subject_prefix` changed.
    /// Permanent: the stream is left as it is.
    #[error(
        "jetstream stream {stream:?} exists with subjects {found:?}, not {wanted:?}: another \
         deployment uses it, or nats.subject_prefix changed; give this deployment its own \
         nats.stream_prefix, or delete the stream to move it"
    )]
    StreamTaken {
        /// The stream name.
        stream: String,
        /// Its subjects on the server.
        found: Vec<String>,
        /// The subjects this deployment would give it.
        wanted: Vec<String>,
    },
    /// The cluster cannot hold the configured number of stream replicas (too few servers,
    /// or a single server): a deployment problem, not fixed by retrying the same publish.
    #[error(
        "nats.replicas = {asked} needs a JetStream cluster of at least {asked} servers, but {reported}"
    )]
    Replicas {
        /// The replica count asked for (`nats.replicas`).
        asked: usize,
        /// What the server reported.
        reported: String,
    },
    /// Publishing failed or the acknowledgement did not arrive; the message may or may not
    /// be stored, so retry with the same message id.
    #[error("publish to jetstream failed: {reason}")]
    Publish {
        /// What went wrong.
        reason: String,
    },
    /// The encoded message is larger than the server accepts: permanent.
    #[error("launch message is {size} bytes, over the server's limit")]
    TooLarge {
        /// Encoded size in bytes.
        size: usize,
    },
}

impl Error {
    /// Whether the configuration, not the server's state, is at fault: trying again with
    /// the same settings cannot help, so an instance should stop and say so.
    pub fn is_misconfiguration(&self) -> bool {
        matches!(self, Error::StreamTaken { .. })
    }

    /// Whether publishing the same message again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Connect { .. } | Error::Stream { .. } | Error::Publish { .. }
        )
    }
}
