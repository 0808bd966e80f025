//! What a dispatcher round tells the operator: one log line per decision (emitted, skipped,
//! queued, failed and why) and the round's metrics, from the outcomes already decided.

use kairos_store::dispatch::{Claimed, Outcome};

use super::Round;

/// After a round's commit: its summary log and its metrics.
pub(super) fn finished(round: &Round, started: crate::metrics::BatchTimer) {
    tracing::debug!(
        claimed = round.claimed,
        enqueued = round.enqueued,
        skipped = round.skipped,
        queued = round.queued,
        failed = round.failed,
        retry = round.retry,
        deferred = round.deferred,
        "dispatch round"
    );
    crate::metrics::record_round(round, started.elapsed());
}

/// The runs failed before any publish (deadline, missing workflow): one warning each.
pub(super) fn log_failed_early(outcomes: &[Outcome]) {
    for outcome in outcomes {
        tracing::warn!(
            key = %outcome.idempotency_key,
            reason = outcome.reason.as_deref().unwrap_or_default(),
            "launch failed; run failed"
        );
    }
}

/// A skip or a queue decision that stands.
pub(super) fn log_settled(run: &Claimed, outcome: &Outcome) {
    let reason = outcome.reason.as_deref().unwrap_or_default();
    if outcome.status == "SKIPPED" {
        tracing::info!(key = %run.idempotency_key, schedule_id = %run.schedule_id,
            run_at = %run.run_at, reason, "run skipped");
    } else {
        tracing::info!(key = %run.idempotency_key, schedule_id = %run.schedule_id,
            run_at = %run.run_at, reason, "run queued");
    }
}

/// Every publish outcome: emitted (debug: one per run), failed for good (warning each), or
/// left for a retry (one warning per round, so an outage does not log every run).
pub(super) fn log_launched(runs: &[(&Claimed, bool)], launched: &[Outcome]) {
    let mut retry: Option<(usize, &str)> = None;
    for ((run, _), outcome) in runs.iter().zip(launched) {
        let error = outcome.last_error.as_deref().unwrap_or_default();
        match outcome.status {
            "ENQUEUED" => tracing::debug!(key = %run.idempotency_key,
                schedule_id = %run.schedule_id, run_at = %run.run_at, fire_at = %run.fire_at,
                stream_seq = outcome.stream_seq, "run emitted"),
            "FAILED" => tracing::warn!(key = %run.idempotency_key,
                schedule_id = %run.schedule_id, error, "launch failed permanently; run failed"),
            _ => {
                let first = retry.map_or(error, |(_, first)| first);
                retry = Some((retry.map_or(0, |(n, _)| n) + 1, first));
            }
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
