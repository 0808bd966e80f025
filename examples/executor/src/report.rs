//! Status reports (`schemas/status.schema.json`), over HTTP (`POST /runs/{key}/status`) or
//! on the NATS subject the launch message names (`status_subject`; `kairos.status.<key>`
//! when it names none), as a JetStream publish, so it is stored durably.

use anyhow::Context;
use serde::{Deserialize, Serialize};

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
    /// The run's output so far (kairos keeps its last 16 KiB, per attempt, for the run page,
    /// `GET /runs/{key}` and `kairos runs logs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
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
            output: None,
        }
    }

    /// Adds the run's output so far.
    pub fn with_output(mut self, output: &str) -> Self {
        self.output = Some(output.to_string());
        self
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Taken. Over HTTP kairos answers with the run as it is after the report (`Some`);
    /// over NATS there is no answer to read (`None`). Statuses only move forward, so a
    /// report that changed nothing is taken too: read the answer to learn whether a
    /// `STARTED` made this attempt this executor's (see [`RunAnswer::runs_here`]).
    Accepted(Option<RunAnswer>),
    /// Refused with HTTP 409: another executor's STARTED owns this run, or kairos takes no
    /// report about it now (it waits for its next attempt, say). Do not run it.
    OwnedByAnother,
}

/// The fields of kairos's answer (`Run` in `schemas/openapi.json`) that say whose the run is.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RunAnswer {
    /// The run's status after the report (`STARTED`, `SUCCESS`, `CANCELLING`, ...).
    pub status: String,
    /// The attempt in progress, or the last one.
    pub attempt: u32,
    /// The executor that owns the run, once one has reported.
    pub executor_id: Option<String>,
}

impl RunAnswer {
    /// Whether a `STARTED` about `attempt` from `executor_id` made the run this executor's
    /// to run: kairos has it `STARTED`, at that attempt, owned by that executor. Anything
    /// else means another executor has it, it already ended (a redelivered launch of a
    /// finished run answers `SUCCESS`, say), or kairos is at another attempt.
    pub fn runs_here(&self, attempt: u32, executor_id: &str) -> bool {
        self.status == "STARTED"
            && self.attempt == attempt
            && self
                .executor_id
                .as_deref()
                .is_none_or(|id| id == executor_id)
    }
}

/// How status reaches kairos. Cheap to clone.
#[derive(Debug, Clone)]
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
    /// JetStream publish on the launch's `status_subject`, or `<prefix>.status.<key>`.
    Nats {
        /// The JetStream context.
        jetstream: async_nats::jetstream::Context,
        /// Subject prefix (`kairos`).
        prefix: String,
    },
}

impl Reporter {
    /// Sends one status about run `key`, over NATS on `subject` (the launch's
    /// `status_subject`) when given.
    ///
    /// # Errors
    /// Transport failures, refusals other than 409, and a 2xx answer that is not a run.
    pub async fn report(
        &self,
        key: &str,
        subject: Option<&str>,
        update: &StatusUpdate,
    ) -> anyhow::Result<Outcome> {
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
                    200..=299 => {
                        let run = response.json().await.context("read kairos's answer")?;
                        Ok(Outcome::Accepted(Some(run)))
                    }
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
                let subject =
                    subject.map_or_else(|| format!("{prefix}.status.{key}"), str::to_string);
                jetstream
                    .publish(subject, payload.into())
                    .await
                    .context("publish status")?
                    .await
                    .context("status not acknowledged (is kairos's status stream there?)")?;
                // Ownership conflicts are resolved by kairos's status consumer, which logs
                // them; over NATS the executor cannot learn of them synchronously.
                Ok(Outcome::Accepted(None))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: &str, attempt: u32, executor_id: Option<&str>) -> RunAnswer {
        RunAnswer {
            status: status.into(),
            attempt,
            executor_id: executor_id.map(str::to_string),
        }
    }

    #[test]
    fn only_this_attempt_started_by_this_executor_runs_here() {
        assert!(answer("STARTED", 2, Some("me")).runs_here(2, "me"));
        assert!(answer("STARTED", 1, None).runs_here(1, "me"));
        assert!(
            !answer("SUCCESS", 1, Some("me")).runs_here(1, "me"),
            "ended"
        );
        assert!(
            !answer("STARTED", 3, Some("me")).runs_here(2, "me"),
            "a later attempt"
        );
        assert!(
            !answer("STARTED", 1, Some("other")).runs_here(1, "me"),
            "not mine"
        );
        assert!(!answer("CANCELLING", 1, Some("me")).runs_here(1, "me"));
    }

    #[test]
    fn kairos_run_body_reads_as_an_answer() {
        let body = r#"{"idempotency_key": "k", "status": "FAILED", "attempt": 2,
                       "executor_id": null, "started_at": null}"#;
        let run: RunAnswer = serde_json::from_str(body).expect("a run");
        assert_eq!(run, answer("FAILED", 2, None));
    }
}
