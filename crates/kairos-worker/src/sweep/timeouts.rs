//! Runs past `max_run_seconds`, or silent past `heartbeat_timeout_s`, become `TIMED_OUT`
//! and, in the same transaction, get their next attempt or are dead-lettered.

use chrono::{DateTime, Utc};
use kairos_launcher::RunLauncher;
use kairos_store::dispatch::{self, TimedOut};
use kairos_store::{attempts, Tx};

use super::Sweeper;
use crate::metrics::{self, TimeoutReason};
use crate::Result;

impl<L: RunLauncher> Sweeper<L> {
    /// Times runs out and decides each one's next attempt, in one transaction.
    pub(super) async fn time_out(&self) -> Result<usize> {
        let mut tx = Tx::begin(&self.pool).await?;
        let now = kairos_store::now(&mut *tx, None).await?;
        let timed_out = dispatch::time_out(&mut tx, now).await?;
        if timed_out.is_empty() {
            return Ok(0);
        }
        let next: Vec<(String, Option<DateTime<Utc>>)> = timed_out
            .iter()
            .map(|run| (run.idempotency_key.clone(), next_attempt_at(run, now)))
            .collect();
        attempts::settle_timed_out(&mut tx, &next, now).await?;
        tx.commit().await?;
        for (run, (_, at)) in timed_out.iter().zip(&next) {
            let reason = timeout_reason(run);
            metrics::timed_out(reason, 1);
            match at {
                Some(at) => {
                    metrics::retried(1);
                    tracing::warn!(
                        key = %run.idempotency_key,
                        trace_id = %crate::trace_of(&run.idempotency_key),
                        attempt = run.attempt,
                        reason = reason.as_str(),
                        next_at = %at,
                        "run timed out; next attempt scheduled",
                    );
                }
                None => {
                    metrics::dead_lettered(1);
                    tracing::warn!(
                        key = %run.idempotency_key,
                        trace_id = %crate::trace_of(&run.idempotency_key),
                        attempt = run.attempt,
                        reason = reason.as_str(),
                        "run timed out on its last attempt; dead-lettered",
                    );
                }
            }
        }
        Ok(timed_out.len())
    }
}

/// The next attempt's time after a timed-out one, or `None` (the run is dead-lettered).
fn next_attempt_at(run: &TimedOut, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    run.failure
        .retry_policy()
        .next_attempt_at(run.attempt, &run.idempotency_key, now)
}

fn timeout_reason(run: &TimedOut) -> TimeoutReason {
    if run.cause == TimeoutReason::Heartbeat.as_str() {
        TimeoutReason::Heartbeat
    } else {
        TimeoutReason::MaxRunSeconds
    }
}
