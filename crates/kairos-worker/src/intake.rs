//! The one run intake: what executors and callers tell kairos about runs, whatever the
//! channel. Status reports (HTTP `POST /runs/{key}/status` and the NATS status subject) are
//! parsed here with one set of field rules into one [`StatusReport`], and applied by one
//! function ([`Intake::report`]); `POST /run-launcher/start` goes through [`Intake::start`]
//! and `POST /runs/{key}/cancel` through [`Intake::cancel`] (`intake/cancel.rs`).
//! A channel only maps the answer: a status code, or ack / retry / terminate.

mod applier;
mod cancel;
mod decide_reports;
mod held_reports;
mod replicated;
mod report;
mod spans;

pub use cancel::MAX_REASON_TEXT;
pub use decide_reports::Item;
pub use report::{Applied, StatusReport};

use std::sync::{Arc, OnceLock};

use chrono::{DateTime, Utc};
use kairos_core::{
    check_log_url, output_tail, validate_id, Problem, Reported, RunSource, RunStatus,
    MAX_LOG_URL_LEN,
};
use kairos_launcher::status::{Disposition, StatusMessage};
use kairos_registrar::fields::Fields;
use kairos_store::dispatch::{self, ApiRun};
use kairos_store::{runs, wakeups, PgPool, Tx};
use serde_json::Value;

use crate::dispatcher::DispatchNow;
use crate::metrics::{self, StatusOutcome};
use applier::Applier;

/// Why an intake call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database failed; nothing was recorded.
    #[error("intake store call failed")]
    Store(#[from] kairos_store::Error),
    /// A start named a workflow version that is not stored.
    #[error("workflow {workflow_id:?} version {version} not found")]
    WorkflowNotFound {
        /// The workflow.
        workflow_id: String,
        /// Its version.
        version: i32,
    },
    /// The batch the report was in could not be recorded (the database failed, and kept
    /// failing); nothing of it was recorded.
    #[error("status batch not recorded")]
    Batch(#[source] Arc<kairos_store::Error>),
    /// The intake is shutting down; the report was not recorded.
    #[error("status intake stopped")]
    Stopped,
    /// The report was recorded, but no standby had it within the wait: a failover now
    /// could lose it, so it is not acknowledged (sent again, it changes nothing twice).
    #[error("status recorded but not yet on a standby (within {waited_ms} ms)")]
    NotReplicated {
        /// How long the intake waited.
        waited_ms: u64,
    },
    /// A start reused a key for a different run.
    #[error("idempotency_key {key:?} already names a different run")]
    KeyInUse {
        /// The key.
        key: String,
    },
}

/// Result of intake calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Longest `run_id` and `executor_id`.
pub const MAX_ID_TEXT: usize = 200;
/// Longest `error`.
pub const MAX_ERROR_TEXT: usize = 8192;

/// Parses a status report about run `key` (from the path or the subject) out of a JSON
/// body. Every broken rule is returned, each naming its field.
///
/// # Errors
/// The problems, when there is at least one.
pub fn parse_report(key: &str, body: &Value) -> Result<StatusReport, Vec<Problem>> {
    let mut fields = Fields::new(body.clone(), "");
    if let Err(err) = validate_id("idempotency_key", key) {
        fields.absorb(vec![Problem::new("idempotency_key", err.to_string())]);
    }
    if let Some(body_key) = fields.text("idempotency_key", false, 1, 200) {
        if body_key != key {
            fields.problem(
                "idempotency_key",
                "must equal the key in the path or subject",
            );
        }
    }
    let status = fields.string("status", true).and_then(|name| {
        name.parse::<Reported>()
            .map_err(|err| fields.problem("status", format!("must be one of {}", err.allowed)))
            .ok()
    });
    let run_id = fields.text("run_id", false, 1, MAX_ID_TEXT);
    let executor_id = fields.text("executor_id", false, 1, MAX_ID_TEXT);
    let error = fields.text("error", false, 0, MAX_ERROR_TEXT);
    let attempt = fields.positive("attempt", false);
    let retryable = fields.boolean("retryable", false);
    let log_url =
        fields
            .text("log_url", false, 1, MAX_LOG_URL_LEN)
            .filter(|url| match check_log_url(url) {
                Ok(()) => true,
                Err(rule) => {
                    fields.problem("log_url", rule);
                    false
                }
            });
    let output = fields
        .string("output", false)
        .map(|text| output_tail(&text));
    let problems = fields.finish();
    match status {
        Some(status) if problems.is_empty() => Ok(StatusReport {
            status,
            attempt,
            retryable,
            run_id,
            executor_id,
            error,
            log_url,
            output,
        }),
        _ => Err(problems),
    }
}

/// The rule for a key given to `POST /run-launcher/start`: an id, but not 64 lowercase hex
/// digits, which are reserved for the keys kairos derives (so a caller can never name a
/// tick's run), and not `status`, which names the batch route `POST /runs/status` (a run
/// under that key could not be read at `GET /runs/{key}`).
pub fn check_start_key(key: &str) -> Option<Problem> {
    if let Err(err) = validate_id("idempotency_key", key) {
        return Some(Problem::new("idempotency_key", err.to_string()));
    }
    if key == "status" {
        return Some(Problem::new(
            "idempotency_key",
            "'status' is reserved: it names the route POST /runs/status",
        ));
    }
    let derived = key.len() == 64 && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    derived.then(|| {
        Problem::new(
            "idempotency_key",
            "64 lowercase hex digits are reserved for keys kairos derives",
        )
    })
}

/// A `POST /run-launcher/start` request, checked by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartRequest {
    /// The caller's key ([`check_start_key`]).
    pub idempotency_key: String,
    /// The workflow.
    pub workflow_id: String,
    /// Its version.
    pub version: i32,
    /// The user to launch as.
    pub user_id: String,
    /// The logical time (whole seconds).
    pub scheduled_for: DateTime<Utc>,
}

/// The answer to a start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// A new run was created (false: the key existed).
    pub started: bool,
    /// The run's status now (`ENQUEUED`, or `PENDING` when it could not be published yet).
    pub status: RunStatus,
}

/// The intake of one instance. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Intake {
    pool: PgPool,
    dispatcher: Arc<OnceLock<Arc<dyn DispatchNow>>>,
    /// Started by the first report (it needs the runtime).
    applier: Arc<OnceLock<Applier>>,
    /// Status batches written at once, each on its own runs.
    batches: usize,
}

/// Status batches one instance writes at once unless told otherwise: one, since on a
/// machine with few cores more batches at once only make each smaller.
pub const BATCHES_AT_ONCE: usize = 1;

impl Intake {
    /// An intake over `pool`; runs it creates are published by whichever dispatcher wakes
    /// first, until [`Intake::attach`] gives it this instance's.
    pub fn new(pool: PgPool) -> Intake {
        Intake::with_batches(pool, BATCHES_AT_ONCE)
    }

    /// [`Intake::new`] writing up to `batches` status batches at once (at least one), each
    /// on runs no other one touches.
    pub fn with_batches(pool: PgPool, batches: usize) -> Intake {
        Intake {
            pool,
            dispatcher: Arc::new(OnceLock::new()),
            applier: Arc::new(OnceLock::new()),
            batches: batches.max(1),
        }
    }

    /// From now on, a run started here is published at once by `dispatcher` (the first
    /// one attached stays).
    pub fn attach(&self, dispatcher: Arc<dyn DispatchNow>) {
        let _ = self.dispatcher.set(dispatcher);
    }

    /// Applies a report to run `key` (forward-only, first executor owns the run) and
    /// counts it, through this instance's batched applier ([`Intake::report_many`]).
    ///
    /// # Errors
    /// [`Error::Batch`] or [`Error::Stopped`]: nothing was recorded.
    pub async fn report(&self, key: &str, report: &StatusReport) -> Result<Applied> {
        let item = Item {
            key: key.to_string(),
            report: report.clone(),
        };
        self.report_many(vec![item])
            .await
            .pop()
            .expect("one answer per report")
    }

    /// Applies reports, each as [`Intake::report`] would, in the batches of this
    /// instance's applier (with every other report that arrives meanwhile, from any
    /// channel), and answers each, in order. A `FAILED` report of the attempt in progress
    /// is followed, in the same transaction, by the next attempt (its time from the
    /// schedule's retry policy) or by a dead letter, unless the report says `retryable:
    /// false` (then a dead letter). Reports about one run apply in their order. This is
    /// the HTTP routes' way in (the NATS one is [`Intake::take_messages`]): an exported
    /// report span says channel `http`.
    pub async fn report_many(&self, items: Vec<Item>) -> Vec<Result<Applied>> {
        self.apply(items, "http", &[]).await
    }

    /// [`Intake::report_many`] for reports that came over `channel`, with their
    /// `traceparent`s (in order; missing ones are `None`), which their spans use.
    async fn apply(
        &self,
        items: Vec<Item>,
        channel: &'static str,
        traceparents: &[Option<&str>],
    ) -> Vec<Result<Applied>> {
        let reported: Vec<(String, Reported)> = items
            .iter()
            .map(|item| (item.key.clone(), item.report.status))
            .collect();
        let applying = spans::Applying::start();
        let answers = self.applier().apply(items).await;
        for (position, ((key, status), answer)) in reported.iter().zip(&answers).enumerate() {
            if let Ok(applied) = answer {
                count(key, *status, applied);
                if let Some(applying) = applying {
                    let report = spans::Report {
                        key,
                        reported: *status,
                        traceparent: traceparents.get(position).copied().flatten(),
                        channel,
                    };
                    applying.applied(&report, applied);
                }
            }
        }
        answers
    }

    fn applier(&self) -> &Applier {
        self.applier
            .get_or_init(|| Applier::start(self.pool.clone(), self.batches))
    }

    /// Creates the run `request` names (source `api`, due now) unless its key exists, and
    /// publishes it at once through this instance's dispatcher when it has one (else the
    /// first dispatcher woken does). A stream that cannot take it now leaves it `PENDING`.
    ///
    /// # Errors
    /// [`Error::WorkflowNotFound`], [`Error::KeyInUse`], or [`Error::Store`].
    pub async fn start(&self, request: &StartRequest) -> Result<Started> {
        let version = (request.workflow_id.clone(), request.version);
        if dispatch::dags(&self.pool, std::slice::from_ref(&version))
            .await?
            .is_empty()
        {
            return Err(Error::WorkflowNotFound {
                workflow_id: request.workflow_id.clone(),
                version: request.version,
            });
        }
        let run = ApiRun {
            idempotency_key: request.idempotency_key.clone(),
            workflow_id: request.workflow_id.clone(),
            version: request.version,
            user_id: request.user_id.clone(),
            scheduled_for: request.scheduled_for,
        };
        let mut tx = Tx::begin(&self.pool).await?;
        let now = kairos_store::now(&mut *tx, None).await?;
        let created = dispatch::insert_api_run(&mut *tx, &run, now).await?;
        if created {
            wakeups::runs_due(&mut *tx).await?;
        }
        tx.commit().await?;
        if let (true, Some(dispatcher)) = (created, self.dispatcher.get()) {
            if let Err(err) = dispatcher.dispatch_now(&request.idempotency_key).await {
                tracing::warn!(
                    key = %request.idempotency_key,
                    trace_id = %crate::trace_of(&request.idempotency_key),
                    error = %crate::error_chain(&err),
                    "started run not published yet; the dispatcher loop retries it",
                );
            }
        }
        let key_in_use = || Error::KeyInUse {
            key: request.idempotency_key.clone(),
        };
        let stored = runs::get(&self.pool, &request.idempotency_key)
            .await?
            .ok_or_else(key_in_use)?;
        let same = stored.source == RunSource::Api
            && stored.workflow_id == run.workflow_id
            && stored.version == run.version
            && stored.user_id == run.user_id
            && stored.run_at == run.scheduled_for;
        if !same {
            return Err(key_in_use());
        }
        Ok(Started {
            started: created,
            status: stored.status,
        })
    }

    /// Status messages from NATS: each decoded with the same rules as the HTTP body, all
    /// applied by [`Intake::report_many`], and each answered: a message that can never
    /// succeed (undecodable, broken rule, another executor's run) is terminated and logged
    /// once; one about an unknown or never-published run is sent again later, up to
    /// [`UNPUBLISHED_DELIVERIES`] deliveries, then terminated the same way; a database
    /// failure asks for redelivery (bounded by the consumer).
    pub async fn take_messages(&self, messages: Vec<StatusMessage>) -> Vec<Disposition> {
        let mut dispositions = vec![Disposition::Refuse; messages.len()];
        let mut items = Vec::with_capacity(messages.len());
        let mut positions = Vec::with_capacity(messages.len());
        for (position, message) in messages.iter().enumerate() {
            match decode_message(message) {
                Ok((key, report)) => {
                    items.push(Item { key, report });
                    positions.push(position);
                }
                Err(problems) => {
                    metrics::status_event(metrics::UNKNOWN_STATUS, StatusOutcome::Invalid);
                    let problems: Vec<String> = problems.iter().map(Problem::to_string).collect();
                    tracing::warn!(subject = %message.subject, problems = ?problems,
                        "status message refused; terminated");
                }
            }
        }
        let reports: Vec<(String, Reported, Option<String>)> = items
            .iter()
            .map(|item| {
                let executor = item.report.executor_id.clone();
                (item.key.clone(), item.report.status, executor)
            })
            .collect();
        let traceparents: Vec<Option<&str>> = positions
            .iter()
            .map(|&position| messages[position].traceparent.as_deref())
            .collect();
        let answers = self.apply(items, "nats", &traceparents).await;
        for ((position, (key, reported, executor_id)), answer) in
            positions.into_iter().zip(reports).zip(answers)
        {
            // The trace the executor reported in (its `traceparent`), beside the run's own:
            // the same id when it continued the launch message's trace.
            let report_trace = messages[position]
                .traceparent
                .as_deref()
                .and_then(kairos_core::trace::trace_id_of)
                .unwrap_or("-");
            dispositions[position] = match answer {
                Ok(Applied::Moved(run)) => {
                    tracing::debug!(
                        key = %key,
                        trace_id = %crate::trace_of(&key),
                        report_trace_id = report_trace,
                        status = %run.status,
                        "run status recorded",
                    );
                    Disposition::Done
                }
                Ok(Applied::Unchanged(run)) => {
                    tracing::debug!(
                        key = %key,
                        trace_id = %crate::trace_of(&key),
                        report_trace_id = report_trace,
                        status = %run.status,
                        reported = %reported,
                        "status report does not move the run forward; ignored",
                    );
                    Disposition::Done
                }
                Ok(refused) if later(&refused, messages[position].deliveries) => {
                    tracing::debug!(
                        key = %key,
                        trace_id = %crate::trace_of(&key),
                        reported = %reported,
                        deliveries = messages[position].deliveries,
                        why = %refusal(&refused),
                        "status report about a run not published here (yet); sent again later",
                    );
                    Disposition::Later
                }
                Ok(refused) => {
                    tracing::warn!(
                        key = %key,
                        trace_id = %crate::trace_of(&key),
                        reported = %reported,
                        executor_id = ?executor_id,
                        why = %refusal(&refused),
                        "status report refused; terminated",
                    );
                    Disposition::Refuse
                }
                Err(err) => {
                    tracing::warn!(
                        key = %key,
                        trace_id = %crate::trace_of(&key),
                        error = %crate::error_chain(&err),
                        "status not recorded; will retry",
                    );
                    Disposition::Retry
                }
            };
        }
        dispositions
    }
}

/// Deliveries of a report about a run the database does not show published before it is
/// refused: with [`kairos_launcher::status::LATER`] between them, about a minute, time enough for
/// a failover that lost the run's last commits to plan and publish it again.
pub const UNPUBLISHED_DELIVERIES: i64 = 12;

/// Whether a refused NATS report is sent again later instead of terminated: one about a
/// run not (or no longer) published, within [`UNPUBLISHED_DELIVERIES`].
fn later(refused: &Applied, deliveries: i64) -> bool {
    matches!(refused, Applied::Unpublished(_) | Applied::NotFound)
        && deliveries < UNPUBLISHED_DELIVERIES
}

/// Counts an answered report, and logs the retries and dead letters it caused.
fn count(key: &str, status: Reported, applied: &Applied) {
    metrics::status_event(status.as_str(), outcome_of(applied));
    if let Applied::Moved(run) = applied {
        match run.status {
            RunStatus::Retrying if status == Reported::Failed => {
                metrics::retried(1);
                tracing::info!(
                    key,
                    trace_id = %crate::trace_of(key),
                    attempt = run.attempt,
                    next_at = %run.fire_at,
                    "attempt failed; next attempt scheduled",
                );
            }
            RunStatus::Failed if status == Reported::Failed && run.dead_lettered_at.is_some() => {
                metrics::dead_lettered(1);
                tracing::warn!(
                    key,
                    trace_id = %crate::trace_of(key),
                    attempt = run.attempt,
                    "last attempt failed; dead-lettered",
                );
            }
            _ => {}
        }
    }
}

/// The key and report of a NATS status message on `<prefix>.status.<key>`: the body must
/// name the same key as the subject.
fn decode_message(message: &StatusMessage) -> Result<(String, StatusReport), Vec<Problem>> {
    let body: Value = serde_json::from_slice(&message.payload)
        .map_err(|err| vec![Problem::new("body", format!("is not valid JSON: {err}"))])?;
    let key = message.key.clone();
    if body.get("idempotency_key").is_none() {
        return Err(vec![Problem::new(
            "idempotency_key",
            "is required in a status message",
        )]);
    }
    parse_report(&key, &body).map(|report| (key, report))
}

/// Why a report was not applied, in one line (for logs and HTTP details).
pub fn refusal(applied: &Applied) -> String {
    match applied {
        Applied::Conflict { run, owner } => {
            format!("run {} is owned by executor {owner:?}", run.idempotency_key)
        }
        Applied::Unpublished(run) => format!(
            "run {} was never published (it is {}), so no executor can be running it",
            run.idempotency_key, run.status
        ),
        Applied::Blocked { run, in_flight } => format!(
            "run {} was not published: run {in_flight} of its schedule {:?} is in flight and \
             the schedule allows one at a time",
            run.idempotency_key, run.schedule_id
        ),
        Applied::NotFound => "no run has this key".to_string(),
        Applied::Moved(_) | Applied::Unchanged(_) => "applied".to_string(),
    }
}

/// The metric outcome of an applied report.
fn outcome_of(applied: &Applied) -> StatusOutcome {
    match applied {
        Applied::Moved(_) => StatusOutcome::Applied,
        Applied::Unchanged(_) => StatusOutcome::Unchanged,
        Applied::Conflict { .. } => StatusOutcome::Conflict,
        Applied::Unpublished(_) => StatusOutcome::Unpublished,
        Applied::Blocked { .. } => StatusOutcome::Blocked,
        Applied::NotFound => StatusOutcome::UnknownRun,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(problems: &[Problem]) -> Vec<&str> {
        problems.iter().map(|p| p.field.as_str()).collect()
    }

    #[test]
    fn a_good_report_parses() {
        let body = json!({"status": "FAILED", "executor_id": "e1", "error": "boom",
            "attempt": 2, "retryable": false});
        let report = parse_report("k1", &body).expect("valid");
        assert_eq!(report.status, Reported::Failed);
        assert_eq!(report.error.as_deref(), Some("boom"));
        assert_eq!((report.attempt, report.retryable), (Some(2), Some(false)));
        let beat = parse_report("k1", &json!({"status": "HEARTBEAT"})).expect("valid");
        assert_eq!(beat.status, Reported::Heartbeat);
    }

    #[test]
    fn every_broken_rule_is_named() {
        let body = json!({"status": "DONE", "run_id": "", "executor_id": 7, "extra": 1});
        let problems = parse_report("bad key", &body).expect_err("invalid");
        let mut named = fields(&problems);
        named.sort_unstable();
        assert_eq!(
            named,
            [
                "executor_id",
                "extra",
                "idempotency_key",
                "run_id",
                "status"
            ]
        );
    }

    #[test]
    fn nul_is_refused_in_every_text_field() {
        for field in ["error", "executor_id", "run_id"] {
            let body = json!({"status": "FAILED", field: "a\u{0}"});
            let problems = parse_report("k", &body).expect_err("NUL");
            assert_eq!(fields(&problems), [field]);
            assert!(problems[0].rule.contains("NUL"));
        }
    }

    #[test]
    fn an_attempt_written_with_a_zero_fraction_is_an_integer() {
        let body = json!({"status": "STARTED", "attempt": 2.0});
        assert!(parse_report("k", &body).is_ok());
        for attempt in [json!(2.5), json!(0.0), json!(-1.0), json!(4294967296.0)] {
            let body = json!({"status": "STARTED", "attempt": attempt});
            let problems = parse_report("k", &body).expect_err("not an attempt");
            assert_eq!(fields(&problems), ["attempt"], "{attempt}");
        }
    }

    #[test]
    fn a_body_key_must_match() {
        let body = json!({"status": "STARTED", "idempotency_key": "other"});
        let problems = parse_report("k", &body).expect_err("mismatch");
        assert_eq!(fields(&problems), ["idempotency_key"]);
    }

    #[test]
    fn derived_keys_are_reserved_for_starts() {
        assert!(check_start_key(&"a".repeat(64)).is_some());
        assert!(check_start_key("ok-key_1").is_none());
        assert!(check_start_key("no:colons").is_some());
        assert!(check_start_key("status").is_some());
        assert!(check_start_key("statuses").is_none());
    }
}
