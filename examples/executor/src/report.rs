//! Status reports (`schemas/status.schema.json`), over HTTP (`POST /runs/{key}/status`) or
//! on the NATS subject `kairos.status.<key>` (JetStream publish, so it is stored durably).

use anyhow::Context;
use serde::Serialize;

/// A run's status as an executor reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// The run began.
    Started,
    /// The run is still working (sent every `heartbeat_every` while it runs).
    Heartbeat,
    /// The run ended well.
    Success,
    /// The run ended badly.
    Failed,
    /// The run was stopped by a cancel request.
    Cancelled,
}

/// The status body.
#[derive(Debug, Clone, Serialize)]
pub struct StatusUpdate {
    /// The new status.
    pub status: Status,
    /// Which executor sends it.
    pub executor_id: String,
    /// The `attempt` of the launch message it is about; kairos ignores a report about
    /// another attempt than the one in progress.
    pub attempt: u32,
    /// The run's key; sent on NATS only (on HTTP it is in the path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With `FAILED`: `Some(false)` when another attempt cannot help (kairos dead-letters the
    /// run at once); absent, the schedule's retry policy decides.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
}

impl StatusUpdate {
    /// A status about `attempt` from `executor_id`.
    pub fn new(status: Status, executor_id: &str, attempt: u32) -> Self {
        StatusUpdate {
            status,
            executor_id: executor_id.to_string(),
            attempt,
            idempotency_key: None,
            error: None,
            retryable: None,
        }
    }

    /// Adds the failure reason.
    pub fn with_error(mut self, error: &str) -> Self {
        self.error = Some(error.to_string());
        self
    }

    /// Says that another attempt cannot help (`"retryable": false`).
    pub fn not_retryable(mut self) -> Self {
        self.retryable = Some(false);
        self
    }
}

/// What kairos said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Recorded (or already recorded: statuses are idempotent).
    Accepted,
    /// Refused with HTTP 409: another executor's STARTED owns this run, or kairos takes no
    /// report about it now (it waits for its next attempt, say). Do not run it.
    OwnedByAnother,
}

/// How status reaches kairos.
#[derive(Debug)]
pub enum Reporter {
    /// `POST <base_url>/runs/{key}/status` with an optional bearer token (role executor).
    Http {
        /// The client.
        client: reqwest::Client,
        /// kairos's base URL, e.g. `http://127.0.0.1:8080`.
        base_url: String,
        /// Bearer token, when kairos runs with auth.
        token: Option<String>,
    },
    /// JetStream publish on `<prefix>.status.<key>`.
    Nats {
        /// The JetStream context.
        jetstream: async_nats::jetstream::Context,
        /// Subject prefix (`kairos`).
        prefix: String,
    },
}

impl Reporter {
    /// Sends one status.
    ///
    /// # Errors
    /// Transport failures and refusals other than 409.
    pub async fn report(&self, key: &str, update: &StatusUpdate) -> anyhow::Result<Outcome> {
        match self {
            Reporter::Http {
                client,
                base_url,
                token,
            } => {
                let mut request = client
                    .post(format!("{base_url}/runs/{key}/status"))
                    .json(update);
                if let Some(token) = token {
                    request = request.bearer_auth(token);
                }
                let response = request.send().await.context("POST status")?;
                match response.status().as_u16() {
                    200..=299 => Ok(Outcome::Accepted),
                    409 => Ok(Outcome::OwnedByAnother),
                    code => anyhow::bail!(
                        "kairos answered {code}: {}",
                        response.text().await.unwrap_or_default()
                    ),
                }
            }
            Reporter::Nats { jetstream, prefix } => {
                let mut body = update.clone();
                body.idempotency_key = Some(key.to_string());
                let payload = serde_json::to_vec(&body).context("encode status")?;
                jetstream
                    .publish(format!("{prefix}.status.{key}"), payload.into())
                    .await
                    .context("publish status")?
                    .await
                    .context("status not acknowledged (is kairos's status stream there?)")?;
                // Ownership conflicts are resolved by kairos's status consumer, which logs
                // them; over NATS the executor cannot learn of them synchronously.
                Ok(Outcome::Accepted)
            }
        }
    }
}
