//! `region` and `[regions]`: where this instance runs and the regions of the deployment
//! (docs/regions.md).

use std::time::Duration;

use serde::Deserialize;

use super::{invalid, positive};

/// `[regions]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegionsConfig {
    /// Every region of the deployment; each has its own launch stream. Empty: no regions.
    #[serde(default)]
    pub names: Vec<String>,
    /// A region whose launch stream has not been ready this long is away: its schedules'
    /// new runs go to their fallback regions.
    #[serde(default = "default_fallback_after_s")]
    pub fallback_after_s: u64,
    /// How often each region's launch stream is probed, ms.
    #[serde(default = "default_probe_ms")]
    pub probe_ms: u64,
}

fn default_fallback_after_s() -> u64 {
    10
}

fn default_probe_ms() -> u64 {
    1000
}

impl RegionsConfig {
    /// How long a region may be unready before its runs go to their fallbacks.
    pub fn fallback_after(&self) -> Duration {
        Duration::from_secs(self.fallback_after_s)
    }

    /// How often each region is probed.
    pub fn probe_every(&self) -> Duration {
        Duration::from_millis(self.probe_ms)
    }

    /// How long past due another region's runs wait for their own region's instances before
    /// this instance claims them: a probe interval and a probe's timeout, so that by then a
    /// lost region's stream has been found not ready, and half a second more.
    pub fn others_after(&self) -> Duration {
        self.probe_every() + kairos_launcher::regions::PROBE_TIMEOUT + Duration::from_millis(500)
    }

    /// Checks the names and timings, and that this instance's `region` is one of them.
    pub(super) fn validate(&self, region: &str) -> Result<(), Box<figment::Error>> {
        for (index, name) in self.names.iter().enumerate() {
            if !kairos_registrar::regions::is_region_name(name) {
                return Err(invalid(
                    &format!("regions.names.{index}"),
                    format_args!(
                        "{name:?} is not a region name: 1 to 32 characters, lowercase letters, \
                         digits and '-', starting with a letter"
                    ),
                ));
            }
            if self.names[..index].contains(name) {
                return Err(invalid(
                    &format!("regions.names.{index}"),
                    format_args!("{name:?} is listed twice"),
                ));
            }
        }
        positive("regions.fallback_after_s", self.fallback_after_s)?;
        positive("regions.probe_ms", self.probe_ms)?;
        if region.is_empty() {
            return Ok(());
        }
        if !self.names.iter().any(|name| name == region) {
            return Err(invalid(
                "region",
                format_args!(
                    "{region:?} is not one of regions.names ({})",
                    self.names.join(", ")
                ),
            ));
        }
        Ok(())
    }
}
