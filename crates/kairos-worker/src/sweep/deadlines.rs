//! Run deadlines: runs whose deadline has passed are judged on the database clock; those
//! not `SUCCESS` by it are marked late (counted once each in `kairos_runs_late_total`),
//! and the `kairos_runs_overdue` gauge is set to the runs past their deadline and not final.
//! Nothing is stopped: late is a mark, not a status.

use chrono::{DateTime, Utc};
use kairos_launcher::RunLauncher;
use kairos_store::{deadlines, Tx};

use super::Sweeper;
use crate::metrics;
use crate::Result;

/// Runs judged per statement (one transaction each).
const BATCH: i64 = 5_000;
/// Statements per sweep at most, so one sweep never runs long; the rest waits for the next.
const MAX_BATCHES: usize = 20;

impl<L: RunLauncher> Sweeper<L> {
    /// Marks late the runs not `SUCCESS` by their deadline, as of `pinned` (tests) or the
    /// database's now, and sets the overdue gauge. Returns how many runs this call marked.
    ///
    /// # Errors
    /// [`crate::Error::Store`] when a statement fails (that batch is rolled back).
    pub async fn mark_late(&self, pinned: Option<DateTime<Utc>>) -> Result<usize> {
        let mut marked = 0;
        for _ in 0..MAX_BATCHES {
            let mut tx = Tx::begin(&self.pool).await?;
            let now = kairos_store::now(&mut *tx, pinned).await?;
            let judged = deadlines::judge(&mut tx, now, BATCH).await?;
            tx.commit().await?;
            metrics::late(judged.late.len() as u64);
            for late in &judged.late {
                tracing::warn!(
                    key = %late.idempotency_key,
                    trace_id = %crate::trace_of(&late.idempotency_key),
                    schedule_id = %late.schedule_id,
                    reason = %late.late_reason,
                    "run late",
                );
            }
            marked += judged.late.len();
            if judged.judged < BATCH as u64 {
                break;
            }
        }
        let now = kairos_store::now(&self.pool, pinned).await?;
        metrics::overdue(deadlines::overdue(&self.pool, now).await?);
        Ok(marked)
    }
}
