//! The streams one deployment owns, and how they are created on connect.
//!
//! - Names come from one prefix (`nats.stream_prefix`, default [`DEFAULT_PREFIX`]):
//!   `<prefix>_LAUNCH`, `<prefix>_STATUS`, `<prefix>_DLQ` and `<prefix>_CANCEL`, on the
//!   subjects `<subject_prefix>.launch.>`, `.status.>`, `.dlq.>` and `.cancel.>`. Two
//!   deployments with their own prefixes share a server without touching each other's
//!   streams; NATS itself refuses two streams whose subjects overlap.
//! - A stream that exists with other subjects belongs to another deployment (or to this one
//!   before its `subject_prefix` changed): connecting is refused with
//!   [`Error::StreamTaken`], never by rewriting its subjects.
//! - Every start sends the whole stream configuration: config is the only source of truth
//!   for the streams' limits, and a limit set by hand on the server is reset at the next
//!   start.
//! - The launch and dead-letter streams keep messages for a bounded time and size
//!   ([`Retention`]); the oldest go first. A launch message dropped before any executor took
//!   it is published again by the sweep of lost launches once its start timeout passes.

use std::time::Duration;

use async_nats::jetstream::context::{CreateStreamError, CreateStreamErrorKind};
use async_nats::jetstream::{stream, ErrorCode};

use crate::{Error, NatsLauncher, Result};

/// The default stream prefix: streams `KAIROS_LAUNCH`, `KAIROS_STATUS`, `KAIROS_DLQ` and
/// `KAIROS_CANCEL`.
pub const DEFAULT_PREFIX: &str = "KAIROS";

/// How long the cancel stream keeps a cancel request: it matters only while its run may
/// still be going.
const CANCEL_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// How long and how much a stream keeps; the oldest messages are removed first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Oldest message kept.
    pub max_age: Duration,
    /// Most bytes kept.
    pub max_bytes: i64,
}

impl Retention {
    /// The launch stream's default: 7 days and 4 GiB, far more than the 15-minute duplicate
    /// window and the 5-minute start timeout after which a lost launch is sent again.
    pub const LAUNCH: Retention = Retention {
        max_age: Duration::from_secs(7 * 24 * 3600),
        max_bytes: 4 << 30,
    };
    /// The dead-letter stream's default: 30 days and 1 GiB (the runs' own dead-letter record
    /// stays in PostgreSQL until history retention removes it).
    pub const DEAD_LETTERS: Retention = Retention {
        max_age: Duration::from_secs(30 * 24 * 3600),
        max_bytes: 1 << 30,
    };
}

impl NatsLauncher {
    /// Creates the launch, dead-letter and cancel streams, or brings existing ones of this
    /// deployment to the configured window, limits and replica count.
    ///
    /// # Errors
    /// [`Error::StreamTaken`] when a stream of that name carries other subjects,
    /// [`Error::Replicas`] when the server refuses the replica count, [`Error::Stream`] with
    /// the server's reason otherwise.
    pub async fn ensure_stream(&self) -> Result<()> {
        let config = self.config();
        let prefix = &config.subject_prefix;
        let launch = config.launch_retention;
        let dead_letters = config.dlq_retention;
        for (name, kind, max_age, max_bytes) in [
            (&config.stream, "launch", launch.max_age, launch.max_bytes),
            (
                &config.dlq_stream,
                "dlq",
                dead_letters.max_age,
                dead_letters.max_bytes,
            ),
            (&config.cancel_stream, "cancel", CANCEL_MAX_AGE, -1),
        ] {
            let subject = subjects_of(kind, prefix, !config.regions.is_empty());
            let stream = stream::Config {
                name: name.clone(),
                description: Some(format!("kairos {kind} messages ({subject})")),
                subjects: vec![subject],
                duplicate_window: config.duplicate_window.min(max_age),
                storage: stream::StorageType::File,
                num_replicas: config.replicas,
                max_age,
                max_bytes,
                ..Default::default()
            };
            self.create_or_update(stream).await?;
        }
        self.ensure_region_streams().await
    }

    /// Creates stream `config.name`, or updates it to `config`, and checks that the server
    /// kept the replica count asked for. A stream of that name with other subjects is left
    /// alone and refused.
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
        self.check_subjects(&config).await?;
        let info = self
            .create_then_update(config)
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

    /// Creates the stream; when one of that name exists with another configuration, updates
    /// it. Creating a stream that exists with the same configuration changes nothing and
    /// answers its state, so instances that start together with one configuration send no
    /// update at all: nats-server 2.9 can fail on simultaneous updates of one stream.
    async fn create_then_update(
        &self,
        config: stream::Config,
    ) -> std::result::Result<stream::Info, CreateStreamError> {
        match self.jetstream().create_stream(config.clone()).await {
            Ok(stream) => Ok(stream.cached_info().clone()),
            Err(err) if is_name_taken(&err) => self.jetstream().update_stream(config).await,
            Err(err) => Err(err),
        }
    }

    /// Refuses a stream named like `wanted` that exists with other subjects. A stream that
    /// does not exist (or cannot be read: creating it reports why) passes.
    async fn check_subjects(&self, wanted: &stream::Config) -> Result<()> {
        let Ok(mut existing) = self.jetstream().get_stream(&wanted.name).await else {
            return Ok(());
        };
        let info = existing.info().await.map_err(|err| Error::Stream {
            stream: wanted.name.clone(),
            reason: err.to_string(),
        })?;
        let sorted = |subjects: &[String]| {
            let mut subjects = subjects.to_vec();
            subjects.sort();
            subjects
        };
        let found = sorted(&info.config.subjects);
        if found == sorted(&wanted.subjects)
            || sorted(&one_deployment(&found)) == sorted(&one_deployment(&wanted.subjects))
        {
            return Ok(());
        }
        Err(Error::StreamTaken {
            stream: wanted.name.clone(),
            found,
            wanted: wanted.subjects.clone(),
        })
    }
}

/// Whether the server refused a stream creation because a stream of that name exists with
/// another configuration.
fn is_name_taken(err: &CreateStreamError) -> bool {
    matches!(err.kind(), CreateStreamErrorKind::JetStream(err) if err.error_code() == ErrorCode::STREAM_NAME_EXIST)
}

/// The subjects of this deployment's stream of `kind`: `<prefix>.<kind>.>`, except the
/// launch stream of a deployment with regions, `<prefix>.launch.*`, which leaves
/// `<prefix>.launch.<region>.>` to the regions' streams (NATS refuses two streams whose
/// subjects overlap).
fn subjects_of(kind: &str, prefix: &str, regions: bool) -> String {
    if kind == "launch" && regions {
        format!("{prefix}.launch.*")
    } else {
        format!("{prefix}.{kind}.>")
    }
}

/// Subjects with the launch stream's two forms made one: a deployment that starts or stops
/// using regions narrows or widens its own launch stream (`.launch.>` and `.launch.*`).
fn one_deployment(subjects: &[String]) -> Vec<String> {
    subjects
        .iter()
        .map(|subject| match subject.strip_suffix(".launch.*") {
            Some(prefix) => format!("{prefix}.launch.>"),
            None => subject.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{one_deployment, subjects_of};

    #[test]
    fn the_launch_stream_leaves_region_subjects_to_the_regions() {
        assert_eq!(subjects_of("launch", "kairos", false), "kairos.launch.>");
        assert_eq!(subjects_of("launch", "kairos", true), "kairos.launch.*");
        assert_eq!(subjects_of("dlq", "kairos", true), "kairos.dlq.>");
    }

    #[test]
    fn both_forms_of_the_launch_subjects_are_one_deployment() {
        let narrow = vec!["kairos.launch.*".to_string()];
        let wide = vec!["kairos.launch.>".to_string()];
        assert_eq!(one_deployment(&narrow), one_deployment(&wide));
        let other = vec!["other.launch.>".to_string()];
        assert_ne!(one_deployment(&narrow), one_deployment(&other));
    }
}
