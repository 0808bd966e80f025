//! Launch streams of regions (docs/regions.md). Each region named in `nats.regions` has its
//! own launch stream, `<launch stream>_<REGION>` (`KAIROS_LAUNCH_EU` for region `eu`), on the
//! subjects `<prefix>.launch.<region>.>`, placed on the NATS cluster named like the region
//! (one cluster per region in a supercluster, joined by gateways). A run launched in a region
//! is published there; an executor of that region consumes only its region's stream.
//!
//! - A region's stream is created or updated on connect when its cluster answers; a region
//!   that does not answer is left for later ([`NatsLauncher::region_ready`] creates it the
//!   first time it is asked about a region whose stream does not exist).
//! - A region is ready when its stream answers `STREAM.INFO` with a leader within
//!   [`PROBE_TIMEOUT`]: then it has quorum and takes publishes.

use std::time::Duration;

use async_nats::jetstream::stream;

use crate::{NatsLauncher, Result};

/// How long a probe of a region's stream waits for the answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The launch stream of `region`: the launch stream's name, `_`, the region in capitals.
pub fn region_stream(launch_stream: &str, region: &str) -> String {
    format!("{launch_stream}_{}", region.to_uppercase())
}

impl NatsLauncher {
    /// The stream configuration of `region`'s launch stream.
    pub(crate) fn region_stream_config(&self, region: &str) -> stream::Config {
        let config = self.config();
        let prefix = &config.subject_prefix;
        let retention = config.launch_retention;
        stream::Config {
            name: region_stream(&config.stream, region),
            description: Some(format!(
                "kairos launch messages of region {region} ({prefix}.launch.{region}.>)"
            )),
            subjects: vec![format!("{prefix}.launch.{region}.>")],
            duplicate_window: config.duplicate_window.min(retention.max_age),
            storage: stream::StorageType::File,
            num_replicas: config.replicas,
            max_age: retention.max_age,
            max_bytes: retention.max_bytes,
            placement: Some(stream::Placement {
                cluster: Some(region.to_string()),
                tags: Vec::new(),
            }),
            ..Default::default()
        }
    }

    /// Creates or updates the launch stream of every configured region, all at once: a
    /// region that does not answer costs the start one wait, however many there are. A
    /// region whose cluster does not answer is logged and left: it is not ready, and its
    /// runs wait or go to their fallback until it answers.
    ///
    /// # Errors
    /// [`crate::Error::StreamTaken`] when a region's stream exists with other subjects
    /// (a misconfiguration, never a passing outage).
    pub(crate) async fn ensure_region_streams(&self) -> Result<()> {
        let creates = self.config().regions.iter().map(|region| async move {
            let config = self.region_stream_config(region);
            let create = tokio::time::timeout(PROBE_TIMEOUT * 5, self.create_or_update(config));
            (region, create.await)
        });
        for (region, created) in futures::future::join_all(creates).await {
            match created {
                Ok(Ok(_)) => {}
                Ok(Err(err)) if err.is_misconfiguration() => return Err(err),
                Ok(Err(err)) => {
                    tracing::warn!(region, error = %err, "region launch stream not ready");
                }
                Err(_) => tracing::warn!(region, "region launch stream did not answer"),
            }
        }
        Ok(())
    }

    /// Whether `region`'s launch stream answers with a leader within [`PROBE_TIMEOUT`]
    /// (creating it when it does not exist yet).
    pub(crate) async fn probe_region(&self, region: &str) -> bool {
        let name = region_stream(&self.config().stream, region);
        let probe = async {
            match self.jetstream().get_stream(&name).await {
                Ok(stream) => stream
                    .cached_info()
                    .cluster
                    .as_ref()
                    .is_none_or(|cluster| cluster.leader.is_some()),
                Err(err) if stream_not_found(&err) => self
                    .create_or_update(self.region_stream_config(region))
                    .await
                    .is_ok(),
                Err(_) => false,
            }
        };
        tokio::time::timeout(PROBE_TIMEOUT, probe)
            .await
            .unwrap_or(false)
    }
}

/// Whether the server answered that the stream does not exist (it was never created: its
/// region did not answer when the instances started).
fn stream_not_found(err: &async_nats::jetstream::context::GetStreamError) -> bool {
    use async_nats::jetstream::context::GetStreamErrorKind;
    use async_nats::jetstream::ErrorCode;
    matches!(err.kind(), GetStreamErrorKind::JetStream(server)
        if server.error_code() == ErrorCode::STREAM_NOT_FOUND)
}

#[cfg(test)]
mod tests {
    use super::region_stream;

    #[test]
    fn a_region_stream_is_the_launch_stream_with_the_region_in_capitals() {
        assert_eq!(region_stream("KAIROS_LAUNCH", "eu"), "KAIROS_LAUNCH_EU");
        assert_eq!(region_stream("X_LAUNCH", "us-east"), "X_LAUNCH_US-EAST");
    }
}
