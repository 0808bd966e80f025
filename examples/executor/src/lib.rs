//! An example executor for kairos, written only from `schemas/launch.schema.json`,
//! `schemas/dag.schema.json` and `schemas/status.schema.json` (no kairos crate is used).
//!
//! It pulls launch messages from the `KAIROS_LAUNCH` stream with a durable consumer and works
//! on up to [`Settings::concurrency`] of them at once, each in its own task (`consume.rs`):
//! it reports `STARTED`, "runs" the DAG's nodes in dependency order while reporting
//! `HEARTBEAT` every [`Settings::heartbeat_every`], reports `SUCCESS` or `FAILED`, and only
//! then acknowledges the message (every heartbeat and the end report carry the run's output
//! so far, a line per node and the failure, which kairos shows per attempt) — so a crash mid-run means redelivery. While a run works its
//! message gets a progress ack every third of the consumer's ack wait, so a run longer than
//! the ack wait is not redelivered and run twice. Over HTTP kairos answers `STARTED` with the
//! run; a run that is not this attempt's and this executor's (409, finished, another attempt)
//! is not run. Every report echoes the launch message's `attempt`, so a late report about an
//! earlier attempt never touches a newer one. Cancel requests (`schemas/cancel.schema.json`,
//! on `<prefix>.cancel.>`) stop the run they name, which is then reported `CANCELLED`
//! (`cancel.rs`).
//!
//! Demo node fields: `sleep_ms` (how long the node "runs"), `fail: true` (the node fails),
//! `fail_until_attempt: n` (the node fails while the attempt is below `n`: a flaky job) and
//! `fatal: true` (the node fails and the report says `"retryable": false`, so kairos
//! dead-letters the run without another attempt).

mod cancel;
mod consume;
mod dag;
mod report;

use std::time::Duration;

use serde::Deserialize;

pub use cancel::{CancelRequest, Cancels};
pub use consume::run;
pub use dag::dependency_order;
pub use report::{Outcome, Reporter, RunAnswer, Status, StatusUpdate};

/// The launch message body (`schemas/launch.schema.json`); fields not needed here are skipped.
#[derive(Debug, Clone, Deserialize)]
pub struct Launch {
    /// The run's key: report status under it.
    pub idempotency_key: String,
    /// The workflow launched.
    pub workflow_id: String,
    /// The planned tick.
    pub scheduled_for: String,
    /// 1, or more for an intentional re-launch.
    pub attempt: u32,
    /// The NATS subject to report this run's status on.
    #[serde(default)]
    pub status_subject: Option<String>,
    /// The DAG to run.
    pub dag: serde_json::Value,
}

/// Where to consume from and who this executor is.
#[derive(Debug, Clone)]
pub struct Settings {
    /// NATS server URL.
    pub nats_url: String,
    /// The launch stream (`KAIROS_LAUNCH`).
    pub stream: String,
    /// Durable consumer name; executors sharing it share the work.
    pub durable: String,
    /// This executor's id, sent with every status.
    pub executor_id: String,
    /// kairos's subject prefix (`kairos`): cancel requests arrive on `<prefix>.cancel.>`.
    pub subject_prefix: String,
    /// How often to report `HEARTBEAT` while a run works: above zero, and well below the
    /// schedules' `heartbeat_timeout_s` ([`DEFAULT_HEARTBEAT_EVERY`] unless told).
    pub heartbeat_every: Duration,
    /// Most runs worked on at once (at least 1). A message is fetched only when one of these
    /// slots is free, so none waits unworked in the executor while its ack wait runs out.
    pub concurrency: usize,
    /// The durable's ack wait, set when this executor creates it (an existing durable keeps
    /// its own). Progress acks go out every third of the durable's actual ack wait.
    pub ack_wait: Duration,
    /// Where a durable this executor creates starts (an existing one keeps its own).
    pub deliver: Deliver,
}

/// Where a new durable consumer starts in the launch stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deliver {
    /// At the launches published from its creation on: a fresh executor does not replay the
    /// stream (kept for days), whose older launches other executors ran or are running.
    New,
    /// At the start of the stream: every launch it still holds.
    All,
}

/// The heartbeat interval when none is given: 10 s.
pub const DEFAULT_HEARTBEAT_EVERY: Duration = Duration::from_secs(10);
/// Runs worked on at once when not told: 4.
pub const DEFAULT_CONCURRENCY: usize = 4;
/// The ack wait of a durable this executor creates, when not told: 30 s.
pub const DEFAULT_ACK_WAIT: Duration = Duration::from_secs(30);

/// What to do with a launch message once [`handle`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// The run ended, or it is not this executor's to run: acknowledge the message.
    Ack,
    /// `STARTED` could not be sent, so the run was not claimed: leave the message
    /// unacknowledged, and JetStream delivers it again after the ack wait.
    Redeliver,
}

/// Runs one launch: STARTED, the nodes in order with heartbeats, then SUCCESS or FAILED
/// (or CANCELLED when a cancel request names it), every report about `launch.attempt`.
/// When kairos's answer to STARTED says the run is not this attempt's and this executor's
/// (another executor owns it, it already ended, kairos is at another attempt), it is not run.
pub async fn handle(
    launch: &Launch,
    settings: &Settings,
    reporter: &Reporter,
    cancels: &Cancels,
) -> Handled {
    let key = &launch.idempotency_key;
    let executor_id = settings.executor_id.as_str();
    let Some(cancelled) = cancels.begin(key, launch.attempt) else {
        println!("executor: {key} was cancelled before it started; not running it");
        report_cancelled(launch, settings, reporter).await;
        cancels.end(key, launch.attempt);
        return Handled::Ack;
    };
    let started = StatusUpdate::new(Status::Started, executor_id, launch.attempt);
    let claim = reporter
        .report(key, launch.status_subject.as_deref(), &started)
        .await;
    let claimed = match &claim {
        Ok(Outcome::Accepted(None)) => true,
        Ok(Outcome::Accepted(Some(run))) => run.runs_here(launch.attempt, executor_id),
        Ok(Outcome::OwnedByAnother) => false,
        Err(err) => {
            // Without a STARTED on record we cannot claim the run; leave it to redelivery.
            eprintln!("executor: could not report STARTED for {key}: {err:#}; left for redelivery");
            cancels.end(key, launch.attempt);
            return Handled::Redeliver;
        }
    };
    if !claimed {
        cancels.end(key, launch.attempt);
        not_ours(launch, settings, reporter, &claim).await;
        return Handled::Ack;
    }
    let output = Output::default();
    let result = tokio::select! {
        result = run_with_heartbeats(launch, settings, reporter, &output) => Some(result),
        () = cancelled.notified() => None,
    };
    cancels.end(key, launch.attempt);
    let done = match &result {
        None => {
            println!(
                "executor: {key} attempt {} stopped by a cancel",
                launch.attempt
            );
            StatusUpdate::new(Status::Cancelled, executor_id, launch.attempt)
        }
        Some(Ok(())) => StatusUpdate::new(Status::Success, executor_id, launch.attempt),
        Some(Err(failure)) => {
            let failed = StatusUpdate::new(Status::Failed, executor_id, launch.attempt)
                .with_error(&failure.error);
            if failure.retryable {
                failed
            } else {
                failed.not_retryable()
            }
        }
    };
    let done = done.with_output(&output.text());
    if let Err(err) = reporter
        .report(key, launch.status_subject.as_deref(), &done)
        .await
    {
        // The message is acknowledged anyway: running the DAG again would not help, and
        // without an end report kairos times the attempt out.
        eprintln!("executor: could not report the end of {key}: {err:#}");
    }
    Handled::Ack
}

/// Logs why a launch is not run here; a run kairos has `CANCELLING` at this attempt (the
/// cancel came before any executor started it) is confirmed `CANCELLED`.
async fn not_ours(
    launch: &Launch,
    settings: &Settings,
    reporter: &Reporter,
    claim: &anyhow::Result<Outcome>,
) {
    let key = &launch.idempotency_key;
    let attempt = launch.attempt;
    match claim {
        Ok(Outcome::Accepted(Some(run))) => {
            println!(
                "executor: {key} is {} at attempt {} (executor {}); not running attempt {attempt}",
                run.status,
                run.attempt,
                run.executor_id.as_deref().unwrap_or("none")
            );
            let mine = run
                .executor_id
                .as_deref()
                .is_none_or(|id| id == settings.executor_id);
            if run.status == "CANCELLING" && run.attempt == attempt && mine {
                report_cancelled(launch, settings, reporter).await;
            }
        }
        _ => println!("executor: {key} is owned by another executor; not running it"),
    }
}

async fn report_cancelled(launch: &Launch, settings: &Settings, reporter: &Reporter) {
    let key = &launch.idempotency_key;
    let done = StatusUpdate::new(Status::Cancelled, &settings.executor_id, launch.attempt);
    if let Err(err) = reporter
        .report(key, launch.status_subject.as_deref(), &done)
        .await
    {
        eprintln!("executor: could not report CANCELLED for {key}: {err:#}");
    }
}

/// Why a run failed, and whether another attempt could help.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Failure {
    error: String,
    retryable: bool,
}

/// What a run printed so far: a line per node as it begins, and the failure that ended it.
/// Every heartbeat and the end report carry it, so kairos shows the run's output.
#[derive(Debug, Default)]
struct Output(std::sync::Mutex<String>);

impl Output {
    fn line(&self, line: &str) {
        let mut text = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        text.push_str(line);
        text.push('\n');
    }

    fn text(&self) -> String {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// Runs the nodes, reporting `HEARTBEAT` with the output so far every
/// `settings.heartbeat_every` until they end.
async fn run_with_heartbeats(
    launch: &Launch,
    settings: &Settings,
    reporter: &Reporter,
    output: &Output,
) -> Result<(), Failure> {
    let work = run_nodes(launch, output);
    tokio::pin!(work);
    let first_beat = tokio::time::Instant::now() + settings.heartbeat_every;
    let mut beats = tokio::time::interval_at(first_beat, settings.heartbeat_every);
    // After a slow report, beat once and carry on at the interval: no burst of catch-ups.
    beats.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // A heartbeat is sent from this loop, so the work waits for its report; its timers run
    // on meanwhile, and a report takes milliseconds next to an interval of seconds.
    loop {
        tokio::select! {
            result = &mut work => return result,
            _ = beats.tick() => heartbeat(launch, settings, reporter, output).await,
        }
    }
}

/// Sends one `HEARTBEAT`. A lost one is only logged: the next may get through, and if none
/// does, kairos times the attempt out, which is what heartbeats are for.
async fn heartbeat(launch: &Launch, settings: &Settings, reporter: &Reporter, output: &Output) {
    let key = &launch.idempotency_key;
    let beat = StatusUpdate::new(Status::Heartbeat, &settings.executor_id, launch.attempt)
        .with_output(&output.text());
    match reporter
        .report(key, launch.status_subject.as_deref(), &beat)
        .await
    {
        Ok(Outcome::Accepted(_)) => {}
        Ok(Outcome::OwnedByAnother) => {
            eprintln!(
                "executor: kairos refused a heartbeat for {key} (attempt {})",
                launch.attempt
            );
        }
        Err(err) => eprintln!("executor: could not report a heartbeat for {key}: {err:#}"),
    }
}

async fn run_nodes(launch: &Launch, output: &Output) -> Result<(), Failure> {
    let result = run_nodes_in_order(launch, output).await;
    if let Err(failure) = &result {
        output.line(&failure.error);
    }
    result
}

async fn run_nodes_in_order(launch: &Launch, output: &Output) -> Result<(), Failure> {
    // The DAG is the same in every attempt: one that cannot be ordered never will be.
    let order = dependency_order(&launch.dag).map_err(|error| Failure {
        error,
        retryable: false,
    })?;
    for node in &order {
        let spec = launch.dag["nodes"]
            .as_array()
            .and_then(|nodes| nodes.iter().find(|n| n["id"] == node.as_str()))
            .cloned()
            .unwrap_or_default();
        let sleep_ms = spec["sleep_ms"].as_u64().unwrap_or(0);
        let action = spec["action"].as_str().unwrap_or("no action");
        output.line(&format!("node {node} ({action})"));
        println!(
            "executor: {} {} attempt {} node {node} ({action})",
            launch.workflow_id, launch.scheduled_for, launch.attempt
        );
        tokio::time::sleep(Duration::from_millis(sleep_ms)).await;
        node_outcome(node, &spec, launch.attempt)?;
    }
    Ok(())
}

/// What the demo fields `fatal`, `fail` and `fail_until_attempt` make of a node.
fn node_outcome(node: &str, spec: &serde_json::Value, attempt: u32) -> Result<(), Failure> {
    if spec["fatal"].as_bool() == Some(true) {
        return Err(Failure {
            error: format!("node {node} failed fatally"),
            retryable: false,
        });
    }
    if spec["fail"].as_bool() == Some(true) {
        return Err(Failure {
            error: format!("node {node} failed"),
            retryable: true,
        });
    }
    match spec["fail_until_attempt"].as_u64() {
        Some(until) if u64::from(attempt) < until => Err(Failure {
            error: format!("node {node} failed on attempt {attempt} (fails until attempt {until})"),
            retryable: true,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn demo_fields_decide_whether_a_node_fails_and_whether_to_retry() {
        let retryable = |error: &str| {
            Err(Failure {
                error: error.into(),
                retryable: true,
            })
        };
        assert_eq!(node_outcome("a", &json!({"id": "a"}), 1), Ok(()));
        assert_eq!(
            node_outcome("a", &json!({"fail": true}), 3),
            retryable("node a failed")
        );
        let flaky = json!({"fail_until_attempt": 3});
        assert_eq!(
            node_outcome("a", &flaky, 2),
            retryable("node a failed on attempt 2 (fails until attempt 3)")
        );
        assert_eq!(node_outcome("a", &flaky, 3), Ok(()));
        assert_eq!(
            node_outcome("a", &json!({"fatal": true}), 1),
            Err(Failure {
                error: "node a failed fatally".into(),
                retryable: false,
            })
        );
    }
}
