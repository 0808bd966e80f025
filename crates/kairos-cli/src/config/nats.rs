//! `[nats]`: the JetStream server, the deployment's stream names and limits, and the
//! credentials, with the rules that name the offending key.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{invalid, positive};

/// Most partitions of the status stream: one durable consumer each.
pub const MAX_STATUS_PARTITIONS: u16 = 256;

/// `[nats]`: the JetStream server launch messages go to.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsConfig {
    /// Server URL(s), e.g. `nats://127.0.0.1:4222` (comma-separated for a cluster).
    pub url: String,
    /// Names this deployment's streams: `<prefix>_LAUNCH`, `<prefix>_STATUS`,
    /// `<prefix>_DLQ` and `<prefix>_CANCEL` (`KAIROS`).
    pub stream_prefix: String,
    /// The launch stream's name, when it must differ from `<stream_prefix>_LAUNCH`.
    pub stream: Option<String>,
    /// First subject token(s): launches go to `<prefix>.launch.<workflow_id>`.
    pub subject_prefix: String,
    /// The stream's duplicate window in seconds; must exceed `scheduler.launch_deadline_s`.
    pub duplicate_window_s: u64,
    /// Oldest launch message the launch stream keeps, seconds.
    pub launch_max_age_s: u64,
    /// Most bytes the launch stream keeps (the oldest messages go first).
    pub launch_max_bytes: u64,
    /// Oldest dead letter the dead-letter stream keeps, seconds.
    pub dlq_max_age_s: u64,
    /// Most bytes the dead-letter stream keeps.
    pub dlq_max_bytes: u64,
    /// Copies the cluster keeps of the launch, status and dead-letter streams: 1, or 3 on a
    /// cluster of at least 3 JetStream servers (checked when connecting).
    pub replicas: usize,
    /// Partitions of the status stream, shared among the instances that run the status role
    /// (0: one consumer shared by all). Launch messages name each run's partition subject,
    /// `<prefix>.status.<p>.<key>`; a server mapping `<prefix>.status.*` →
    /// `<prefix>.status.{{partition(N,1)}}.{{wildcard(1)}}` sends reports on
    /// `<prefix>.status.<key>` to the same partitions.
    pub status_partitions: u16,
    /// CA bundle (PEM) to trust for TLS.
    pub tls_ca: Option<PathBuf>,
    /// Client certificate (PEM) for mutual TLS; needs `tls_key`.
    pub tls_cert: Option<PathBuf>,
    /// Client private key (PEM) for mutual TLS; needs `tls_cert`.
    pub tls_key: Option<PathBuf>,
    /// A NATS `.creds` file (JWT + nkey seed).
    pub creds_file: Option<PathBuf>,
    /// User name; needs `password`.
    pub user: Option<String>,
    /// Password for `user`.
    pub password: Option<String>,
    /// Auth token.
    pub token: Option<String>,
}

impl fmt::Debug for NatsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hidden = |secret: &Option<String>| secret.as_ref().map(|_| "<redacted>");
        f.debug_struct("NatsConfig")
            .field("url", &self.url)
            .field("stream_prefix", &self.stream_prefix)
            .field("stream", &self.stream)
            .field("subject_prefix", &self.subject_prefix)
            .field("duplicate_window_s", &self.duplicate_window_s)
            .field("launch_max_age_s", &self.launch_max_age_s)
            .field("launch_max_bytes", &self.launch_max_bytes)
            .field("dlq_max_age_s", &self.dlq_max_age_s)
            .field("dlq_max_bytes", &self.dlq_max_bytes)
            .field("replicas", &self.replicas)
            .field("status_partitions", &self.status_partitions)
            .field("tls_ca", &self.tls_ca)
            .field("tls_cert", &self.tls_cert)
            .field("tls_key", &self.tls_key)
            .field("creds_file", &self.creds_file)
            .field("user", &self.user)
            .field("password", &hidden(&self.password))
            .field("token", &hidden(&self.token))
            .finish()
    }
}

impl NatsConfig {
    /// The launcher's settings: streams named from the prefix (the launch stream from
    /// `stream` when set), limits and credentials.
    pub fn launcher(&self) -> kairos_launcher::NatsConfig {
        let mut launcher = kairos_launcher::NatsConfig::new(self.url.clone());
        launcher.name_streams(&self.stream_prefix);
        if let Some(stream) = &self.stream {
            launcher.stream = stream.clone();
        }
        launcher.subject_prefix = self.subject_prefix.clone();
        launcher.duplicate_window = Duration::from_secs(self.duplicate_window_s);
        launcher.launch_retention = kairos_launcher::Retention {
            max_age: Duration::from_secs(self.launch_max_age_s),
            max_bytes: i64::try_from(self.launch_max_bytes).unwrap_or(i64::MAX),
        };
        launcher.dlq_retention = kairos_launcher::Retention {
            max_age: Duration::from_secs(self.dlq_max_age_s),
            max_bytes: i64::try_from(self.dlq_max_bytes).unwrap_or(i64::MAX),
        };
        launcher.replicas = self.replicas;
        launcher.status_partitions = self.status_partitions;
        launcher.tls_ca = self.tls_ca.clone();
        launcher.tls_client = self.tls_cert.clone().zip(self.tls_key.clone());
        launcher.creds_file = self.creds_file.clone();
        launcher.user_password = self.user.clone().zip(self.password.clone());
        launcher.token = self.token.clone();
        launcher
    }

    /// Checks the `[nats]` rules; `launch_deadline_s` and `start_timeout_s` come from
    /// `[scheduler]`.
    pub(super) fn validate(
        &self,
        launch_deadline_s: u64,
        start_timeout_s: u64,
    ) -> Result<(), Box<figment::Error>> {
        if self.url.trim().is_empty() {
            return Err(invalid("nats.url", "must not be empty"));
        }
        stream_name("nats.stream_prefix", &self.stream_prefix)?;
        if let Some(stream) = &self.stream {
            stream_name("nats.stream", stream)?;
        }
        let subject_ok = self.subject_prefix.split('.').all(|token| {
            !token.is_empty()
                && token
                    .chars()
                    .all(|c| c.is_ascii_graphic() && !matches!(c, '*' | '>'))
        });
        if !subject_ok {
            return Err(invalid(
                "nats.subject_prefix",
                "must be dot-separated non-empty subject tokens without spaces, '*' or '>'",
            ));
        }
        positive("nats.duplicate_window_s", self.duplicate_window_s)?;
        // Two replicas survive no more failures than one (a quorum of two needs both), and
        // more than three is not what we test: 1 or 3 only.
        if !matches!(self.replicas, 1 | 3) {
            return Err(invalid("nats.replicas", "must be 1 or 3"));
        }
        if self.status_partitions > MAX_STATUS_PARTITIONS {
            return Err(invalid(
                "nats.status_partitions",
                format!("must be at most {MAX_STATUS_PARTITIONS} (0: not partitioned)"),
            ));
        }
        // Invariant "one message per tick" of docs/design.md §2: a retry may re-publish up to
        // the launch deadline after the first attempt, and must still land in the dedup
        // window.
        if self.duplicate_window_s <= launch_deadline_s {
            return Err(invalid(
                "nats.duplicate_window_s",
                format_args!("must exceed scheduler.launch_deadline_s ({launch_deadline_s})"),
            ));
        }
        self.validate_retention(start_timeout_s)?;
        self.validate_credentials()
    }

    /// The streams keep a message longer than it can be published again under its id, and
    /// longer than an executor may take to start it before the sweep sends it again.
    fn validate_retention(&self, start_timeout_s: u64) -> Result<(), Box<figment::Error>> {
        let window = self.duplicate_window_s;
        for (key, age) in [
            ("nats.launch_max_age_s", self.launch_max_age_s),
            ("nats.dlq_max_age_s", self.dlq_max_age_s),
        ] {
            if age <= window {
                return Err(invalid(
                    key,
                    format_args!("must exceed nats.duplicate_window_s ({window})"),
                ));
            }
        }
        if self.launch_max_age_s <= start_timeout_s {
            return Err(invalid(
                "nats.launch_max_age_s",
                format_args!("must exceed scheduler.start_timeout_s ({start_timeout_s})"),
            ));
        }
        positive("nats.launch_max_bytes", self.launch_max_bytes)?;
        positive("nats.dlq_max_bytes", self.dlq_max_bytes)
    }

    fn validate_credentials(&self) -> Result<(), Box<figment::Error>> {
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            let key = if self.tls_cert.is_some() {
                "nats.tls_key"
            } else {
                "nats.tls_cert"
            };
            return Err(invalid(
                key,
                "must be set together with nats.tls_cert and nats.tls_key",
            ));
        }
        if self.user.is_some() != self.password.is_some() {
            let key = if self.user.is_some() {
                "nats.password"
            } else {
                "nats.user"
            };
            return Err(invalid(
                key,
                "must be set together with nats.user and nats.password",
            ));
        }
        let methods = [
            self.creds_file.is_some(),
            self.user.is_some(),
            self.token.is_some(),
        ];
        if methods.iter().filter(|&&set| set).count() > 1 {
            return Err(invalid(
                "nats.creds_file",
                "conflicts: set at most one of nats.creds_file, nats.user + nats.password, nats.token",
            ));
        }
        Ok(())
    }
}

/// A JetStream stream name (or the prefix of one): ASCII letters, digits, `_` or `-`.
fn stream_name(key: &str, name: &str) -> Result<(), Box<figment::Error>> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        return Ok(());
    }
    Err(invalid(key, "must be ASCII letters, digits, '_' or '-'"))
}
