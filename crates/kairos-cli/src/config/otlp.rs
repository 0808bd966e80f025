//! `[otlp]`: optional export of spans over OTLP/HTTP (protobuf). Off while `endpoint` is
//! empty, the default.

use serde::Deserialize;

use super::{invalid, positive};

/// The path a collector takes traces on, under its OTLP/HTTP base URL.
const TRACES_PATH: &str = "/v1/traces";

/// `[otlp]`: where spans are exported, and how hard kairos tries.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtlpConfig {
    /// The collector's OTLP/HTTP base URL, e.g. `http://127.0.0.1:4318`; spans are posted
    /// to `<endpoint>/v1/traces`. Empty: no export.
    pub endpoint: String,
    /// `service.name` of every exported span.
    pub service_name: String,
    /// Longest wait for the collector to take one batch, ms; the batch is dropped after.
    pub timeout_ms: u64,
    /// Most finished spans waiting for export; more are dropped (logged once), so a slow
    /// or unreachable collector costs neither memory nor time on the hot path.
    pub queue_size: usize,
}

impl OtlpConfig {
    /// The URL spans are posted to; `None` when export is off.
    pub fn traces_url(&self) -> Option<String> {
        let base = self.endpoint.trim().trim_end_matches('/');
        if base.is_empty() {
            return None;
        }
        if base.ends_with(TRACES_PATH) {
            return Some(base.to_string());
        }
        Some(format!("{base}{TRACES_PATH}"))
    }

    /// The rules of `[otlp]`, each error naming its key.
    pub(super) fn validate(&self) -> Result<(), Box<figment::Error>> {
        let endpoint = self.endpoint.trim();
        if !endpoint.is_empty() {
            let parsed = reqwest::Url::parse(endpoint).ok();
            let usable = parsed.as_ref().is_some_and(|url| {
                matches!(url.scheme(), "http" | "https") && url.host_str().is_some()
            });
            if !usable {
                return Err(invalid(
                    "otlp.endpoint",
                    "must be an http:// or https:// URL (a collector's OTLP/HTTP base, \
                     e.g. http://127.0.0.1:4318), or empty for no export",
                ));
            }
        }
        if self.service_name.trim().is_empty() {
            return Err(invalid("otlp.service_name", "must not be empty"));
        }
        positive("otlp.timeout_ms", self.timeout_ms)?;
        positive("otlp.queue_size", self.queue_size as u64)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use figment::Jail;

    use crate::config::load;

    /// `[otlp]` loaded from `toml` in a jail with an empty environment, or the key its
    /// error names.
    // The jail's closure must return `figment::Result`, whose error is large; only writing
    // the file can fail here, so the size does not matter.
    #[allow(clippy::result_large_err)]
    fn otlp(toml: &str) -> Result<super::OtlpConfig, String> {
        let mut answer = None;
        Jail::expect_with(|jail| {
            jail.clear_env();
            jail.create_file("kairos.toml", toml)?;
            answer = Some(
                load(Some(Path::new("kairos.toml")))
                    .map(|config| config.otlp)
                    .map_err(|error| error.path.join(".")),
            );
            Ok(())
        });
        answer.expect("the jail ran")
    }

    #[test]
    fn export_is_off_by_default() {
        let config = otlp("").expect("defaults load");
        assert_eq!(config.endpoint, "");
        assert_eq!(config.traces_url(), None);
        assert_eq!(config.service_name, "kairos");
        assert_eq!(config.timeout_ms, 10_000);
        assert_eq!(config.queue_size, 2048);
    }

    #[test]
    fn an_endpoint_is_the_collectors_base_url() {
        let config = otlp("[otlp]\nendpoint = \"http://collector:4318/\"").expect("load");
        let url = config.traces_url();
        assert_eq!(url.as_deref(), Some("http://collector:4318/v1/traces"));
        let config = otlp("[otlp]\nendpoint = \"https://c.example/v1/traces\"").expect("load");
        let url = config.traces_url();
        assert_eq!(url.as_deref(), Some("https://c.example/v1/traces"));
    }

    #[test]
    fn bad_otlp_values_name_their_key() {
        for (toml, key) in [
            ("endpoint = \"collector:4318\"", "otlp.endpoint"),
            ("endpoint = \"grpc://collector:4317\"", "otlp.endpoint"),
            ("endpoint = \"http://\"", "otlp.endpoint"),
            ("service_name = \" \"", "otlp.service_name"),
            ("timeout_ms = 0", "otlp.timeout_ms"),
            ("queue_size = 0", "otlp.queue_size"),
            ("headers = \"x\"", "otlp.headers"),
        ] {
            let error = otlp(&format!("[otlp]\n{toml}")).expect_err(toml);
            assert_eq!(error, key, "{toml}");
        }
    }
}
