//! What a dispatcher round tells the operator: one log line per decision (emitted, skipped,
//! queued, failed and why) and the round's metrics, from the outcomes already decided.

use kairos_store::dispatch::{Claimed, Outcome, Settled};

use super::Round;
use crate::metrics::{self, LaunchFailure, SkipReason};

impl Round {
    /// After a round's commit: its summary log and its metrics.
    pub(super) fn finished(&self, started: metrics::BatchTimer) {
        tracing::debug!(
            claimed = self.claimed,
            enqueued = self.enqueued,
            skipped = self.skipped,
            queued = self.queued,
            failed = self.failed,
            retry = self.retry,
            deferred = self.deferred,
            "dispatch round"
        );
        self.record(started.elapsed());
    }

    /// Records the round's metrics (one that claimed nothing records nothing).
    pub fn record(&self, elapsed: std::time::Duration) {
        if self.claimed == 0 {
            return;
        }
        metrics::round_duration(elapsed);
        let count = |n: usize| n as u64;
        metrics::emitted(count(self.enqueued));
        let overlap = self.skipped - self.skipped_queue_full - self.skipped_buffer_full;
        for (reason, n) in [
            (SkipReason::Overlap, overlap),
            (SkipReason::QueueFull, self.skipped_queue_full),
            (SkipReason::BufferFull, self.skipped_buffer_full),
        ] {
            if n > 0 {
                metrics::skipped(reason, count(n));
            }
        }
        metrics::queued(count(self.queued));
        let permanent = self.failed - self.failed_late - self.failed_no_workflow;
        for (reason, n) in [
            (LaunchFailure::Deadline, self.failed_late),
            (LaunchFailure::WorkflowMissing, self.failed_no_workflow),
            (LaunchFailure::Permanent, permanent),
            (LaunchFailure::Retryable, self.retry),
        ] {
            if n > 0 {
                metrics::failed_launch(reason, count(n));
            }
        }
        metrics::drift(&self.drift_seconds);
    }
}

/// The runs failed before any publish (deadline, missing workflow): one warning each.
pub(super) fn failed_early(outcomes: &[Outcome]) {
    for outcome in outcomes {
        tracing::warn!(
            key = %outcome.key(),
            reason = outcome.reason().unwrap_or_default(),
            "launch failed; run failed"
        );
    }
}

/// A skip or a queue decision that stands.
pub(super) fn settled(run: &Claimed, outcome: &Outcome) {
    let reason = outcome.reason().unwrap_or_default();
    let decision = match outcome.settled() {
        Settled::Skipped { .. } => "run skipped",
        _ => "run queued",
    };
    tracing::info!(
        key = %run.idempotency_key,
        trace_id = %crate::trace_of(&run.idempotency_key),
        schedule_id = %run.schedule_id,
        run_at = %run.run_at,
        reason,
        "{decision}",
    );
}

/// Every publish outcome: emitted (debug: one per run), failed for good (warning each), or
/// left for a retry (one warning per round, so an outage does not log every run).
pub(super) fn launched(runs: &[(&Claimed, bool)], outcomes: &[Outcome]) {
    let mut retry: Option<(usize, &str)> = None;
    for ((run, _), outcome) in runs.iter().zip(outcomes) {
        match outcome.settled() {
            Settled::Enqueued { stream_seq, .. } => {
                tracing::debug!(
                    key = %run.idempotency_key,
                    trace_id = %crate::trace_of(&run.idempotency_key),
                    schedule_id = %run.schedule_id,
                    run_at = %run.run_at,
                    fire_at = %run.fire_at,
                    stream_seq,
                    "run emitted",
                )
            }
            Settled::Refused { error } => {
                tracing::warn!(
                    key = %run.idempotency_key,
                    trace_id = %crate::trace_of(&run.idempotency_key),
                    schedule_id = %run.schedule_id,
                    error,
                    "launch failed permanently; run failed",
                )
            }
            Settled::Retry { error } => {
                let first = retry.map_or(error.as_str(), |(_, first)| first);
                retry = Some((retry.map_or(0, |(n, _)| n) + 1, first));
            }
            _ => {}
        }
    }
    if let Some((runs, error)) = retry {
        tracing::warn!(
            runs,
            error,
            "launch failed; runs stay pending and are retried"
        );
    }
}
