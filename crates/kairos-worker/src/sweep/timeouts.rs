//! The dispatcher's sweep, on its own interval: in-flight runs past `max_run_seconds` or
//! silent past `heartbeat_timeout_s` become `TIMED_OUT` and, in the same transaction, get
//! their next attempt or are dead-lettered; cancels unconfirmed past `cancel_timeout` end
//! and unsent cancel messages go out (`cancels.rs`); the oldest `QUEUED` run of every schedule that
//! nothing holds is released; launches no executor started are re-published
//! (`republish.rs`); dead letters not yet copied to the DLQ stream are published.

use chrono::{DateTime, Utc};
use kairos_launcher::{DeadLetter, RunLauncher};
use kairos_store::dispatch::{self, TimedOut};
use kairos_store::{attempts, Tx};

use super::{launch, report, Dispatcher, Result};
use crate::metrics::{self, TimeoutReason};

/// Dead letters copied to the DLQ stream per sweep.
const DEAD_LETTERS_PER_SWEEP: i64 = 500;

impl<L: RunLauncher> Dispatcher<L> {
    /// Runs the sweep. Returns how many runs timed out and how many queued runs were
    /// released.
    ///
    /// # Errors
    /// [`super::Error::Store`] when a statement fails (that step is rolled back).
    pub async fn sweep(&self) -> Result<(usize, usize)> {
        let timed_out = self.time_out().await?;
        self.time_out_cancels().await?;
        self.send_cancels().await?;
        self.republish_unstarted().await?;
        let now = kairos_store::now(&self.pool, None).await?;
        let released = dispatch::release_queued(&self.pool, now).await?;
        for key in &released {
            tracing::info!(key = %key, "queued run released (nothing holds its schedule)");
        }
        self.send_dead_letters().await?;
        Ok((timed_out, released.len()))
    }

    /// Times runs out and decides each one's next attempt, in one transaction.
    async fn time_out(&self) -> Result<usize> {
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
                    tracing::warn!(key = %run.idempotency_key, attempt = run.attempt,
                        reason = reason.as_str(), next_at = %at, "run timed out; next attempt scheduled");
                }
                None => {
                    metrics::dead_lettered(1);
                    tracing::warn!(key = %run.idempotency_key, attempt = run.attempt,
                        reason = reason.as_str(), "run timed out on its last attempt; dead-lettered");
                }
            }
        }
        Ok(timed_out.len())
    }

    /// Publishes dead letters not yet in the DLQ stream (locked while publishing, like a
    /// claim: a killed sweep leaves them for the next, and the message id de-duplicates a
    /// second copy).
    async fn send_dead_letters(&self) -> Result<()> {
        let mut tx = Tx::begin(&self.pool).await?;
        let runs = attempts::unsent_dead_letters(&mut tx, DEAD_LETTERS_PER_SWEEP).await?;
        if runs.is_empty() {
            return Ok(());
        }
        let claimed: Vec<_> = runs.iter().map(launch::as_claimed).collect();
        let dags = launch::Dags::load(&mut tx, &claimed).await?;
        let letters: Vec<DeadLetter> = runs
            .iter()
            .zip(&claimed)
            .map(|(run, claimed)| DeadLetter {
                launch: launch::message(claimed, dags.get(claimed).cloned().unwrap_or_default()),
                attempts: u32::try_from(run.attempt).unwrap_or(1),
                last_error: run.last_error.clone().or_else(|| run.reason.clone()),
            })
            .collect();
        let acks = self.launcher.dead_letter(&letters).await;
        let sent = report::acknowledged(
            runs.iter().map(|run| run.idempotency_key.as_str()),
            &acks,
            "dead letters not copied to the DLQ stream; retried next sweep",
        );
        let now = kairos_store::now(&mut *tx, None).await?;
        attempts::mark_sent(&mut tx, &sent, now).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// The next attempt's time after a timed-out one, or `None` (the run is dead-lettered).
fn next_attempt_at(run: &TimedOut, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    next_attempt(&run.failure, run.attempt, &run.idempotency_key, now)
}

/// The time of the attempt after `attempt` by `failure`'s retry policy, or `None`.
pub(super) fn next_attempt(
    failure: &kairos_store::schedules::FailurePolicy,
    attempt: i32,
    key: &str,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let attempt = u32::try_from(attempt).unwrap_or(1);
    let wait = failure.retry_policy().delay_after(attempt, key)?;
    Some(now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX))
}

fn timeout_reason(run: &TimedOut) -> TimeoutReason {
    if run.cause == TimeoutReason::Heartbeat.as_str() {
        TimeoutReason::Heartbeat
    } else {
        TimeoutReason::MaxRunSeconds
    }
}
