//! The launch message of docs/design.md §5 (`schemas/launch.schema.json`), as sent on
//! `<nats.subject_prefix>.launch.<workflow_id>`, or `<prefix>.launch.<region>.<workflow_id>`
//! for a run launched in a region.

use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

/// Why a run exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// A tick of the schedule.
    Schedule,
    /// A trigger-now request.
    Manual,
    /// A backfill over past ticks.
    Backfill,
    /// `POST /run-launcher/start`.
    Api,
    /// A chained schedule (`@after <parent>`) after its parent's run.
    Chain,
}

impl From<kairos_core::RunSource> for Source {
    fn from(source: kairos_core::RunSource) -> Source {
        use kairos_core::RunSource;
        match source {
            RunSource::Schedule => Source::Schedule,
            RunSource::Manual => Source::Manual,
            RunSource::Backfill => Source::Backfill,
            RunSource::Api => Source::Api,
            RunSource::Chain => Source::Chain,
        }
    }
}

/// One launch message. The body an executor receives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaunchMessage {
    /// The run's key; also the `Nats-Msg-Id` of the first attempt.
    pub idempotency_key: String,
    /// The schedule the run belongs to.
    pub schedule_id: String,
    /// Workflow launched (also the last subject token).
    pub workflow_id: String,
    /// Workflow version launched.
    pub version: i64,
    /// Owner of the schedule.
    pub user_id: String,
    /// The planned tick (`run_at`), RFC 3339 UTC.
    pub scheduled_for: String,
    /// The tick plus jitter, RFC 3339 UTC.
    pub fire_at: String,
    /// Why the run exists.
    pub source: Source,
    /// 1 for the first launch; higher for an intentional re-launch.
    pub attempt: u32,
    /// The region it is launched in: its schedule's region, or a fallback region while that
    /// one's launch stream is unavailable. Absent for a run launched without a region.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The workflow's DAG JSON, shared by every message of the version (a burst's messages
    /// do not each hold a copy).
    pub dag: Arc<serde_json::Value>,
}

impl LaunchMessage {
    /// Formats an instant as the message does: UTC, `Z`, fractions only when non-zero.
    pub fn timestamp(at: DateTime<Utc>) -> String {
        at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
    }

    /// The subject this message is published on: `<prefix>.launch.<workflow_id>`, or
    /// `<prefix>.launch.<region>.<workflow_id>` in a region.
    pub fn subject(&self, prefix: &str) -> String {
        match &self.region {
            Some(region) => format!("{prefix}.launch.{region}.{}", self.workflow_id),
            None => format!("{prefix}.launch.{}", self.workflow_id),
        }
    }

    /// The stream de-duplication id: the key for attempt 1, `key:attempt` after that, so an
    /// intentional re-launch is a new message while a retry of the same attempt is not.
    pub fn msg_id(&self) -> String {
        if self.attempt <= 1 {
            self.idempotency_key.clone()
        } else {
            format!("{}:{}", self.idempotency_key, self.attempt)
        }
    }

    /// The JSON body.
    pub fn encode(&self) -> Vec<u8> {
        // Invariant: every field serializes (strings, integers, a JSON value).
        serde_json::to_vec(self).expect("launch messages always serialize")
    }

    /// The JSON body as published on NATS: the message plus `status_subject`, the subject
    /// its executor reports the run's status on.
    pub fn encode_reporting_on(&self, status_subject: &str) -> Vec<u8> {
        serde_json::to_vec(&self.reporting_on(status_subject))
            .expect("launch messages always serialize")
    }

    /// The body as published on NATS, to serialize (its fields in the order sent).
    #[must_use]
    pub fn reporting_on<'a>(&'a self, status_subject: &'a str) -> PublishedLaunch<'a> {
        PublishedLaunch {
            message: self,
            status_subject,
        }
    }
}

/// A launch message as published: its fields, then `status_subject`.
#[derive(Debug, Serialize)]
pub struct PublishedLaunch<'a> {
    #[serde(flatten)]
    message: &'a LaunchMessage,
    status_subject: &'a str,
}

/// The copy of a run whose last attempt failed, published on `<prefix>.dlq.<workflow_id>`
/// in stream `KAIROS_DLQ` (`schemas/dead_letter.schema.json`): its launch message plus how
/// many attempts it had and the last error.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeadLetter {
    /// The run's launch message (`attempt` is its last attempt).
    #[serde(flatten)]
    pub launch: LaunchMessage,
    /// Attempts made.
    pub attempts: u32,
    /// The last attempt's error, as reported or as the timeout says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl DeadLetter {
    /// `<prefix>.dlq.<workflow_id>`.
    pub fn subject(&self, prefix: &str) -> String {
        format!("{prefix}.dlq.{}", self.launch.workflow_id)
    }

    /// `key:dlq:<attempt>`: a dead letter is copied once per final failure, even when the
    /// sweep that publishes it is retried.
    pub fn msg_id(&self) -> String {
        format!(
            "{}:dlq:{}",
            self.launch.idempotency_key, self.launch.attempt
        )
    }

    /// The JSON body.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("dead letters always serialize")
    }
}

/// A request to an executor to stop a run (`POST /runs/{key}/cancel`, or overlap
/// `cancel_other`), published on `<prefix>.cancel.<workflow_id>` in stream `KAIROS_CANCEL`
/// (`schemas/cancel.schema.json`). The executor stops the run if it has it and reports
/// `CANCELLED`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CancelMessage {
    /// The run's key.
    pub idempotency_key: String,
    /// The executor's run id, when it reported one.
    pub run_id: Option<String>,
    /// The attempt in progress (the one to stop).
    pub attempt: u32,
    /// Why it is cancelled.
    pub reason: Option<String>,
    /// The run's workflow: the subject's last token (not in the body).
    #[serde(skip)]
    pub workflow_id: String,
    /// The run's schedule (the `ce-source` header; not in the body).
    #[serde(skip)]
    pub schedule_id: String,
    /// When the cancel was asked for, RFC 3339 (the `ce-time` header; not in the body).
    #[serde(skip)]
    pub requested_at: String,
}

impl CancelMessage {
    /// `<prefix>.cancel.<workflow_id>`.
    pub fn subject(&self, prefix: &str) -> String {
        format!("{prefix}.cancel.{}", self.workflow_id)
    }

    /// `key:cancel:<attempt>`: one cancel per attempt in the stream, however often the
    /// sweep re-sends it.
    pub fn msg_id(&self) -> String {
        format!("{}:cancel:{}", self.idempotency_key, self.attempt)
    }

    /// The JSON body.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("cancel messages always serialize")
    }
}
