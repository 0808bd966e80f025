//! Run deadlines: runs whose deadline has passed are judged on the database clock; those
//! not `SUCCESS` by it are marked late (counted once each in `kairos_runs_late_total`),
//! and the `kairos_runs_overdue` gauge is set to the runs past their deadline and not final.
//! Nothing is stopped: late is a mark, not a status.
//!
//! First, the ticks of paused schedules with a deadline that have come are written as
//! `SKIPPED` runs naming the pause (`kairos_registrar::record_paused_ticks`), so a tick that
//! never launched because of a pause is judged like any other run.

use chrono::{DateTime, Utc};
use kairos_launcher::RunLauncher;
use kairos_store::{deadlines, Tx};

use super::Sweeper;
use crate::metrics;
use crate::Result;

/// Runs judged per statement (one transaction each).
const BATCH: i64 = 5_000;
/// Runs of paused schedules' ticks one sweep writes, at most (give or take a batch): the
/// rest waits for the next sweep.
const MAX_PAUSED_TICKS: u64 = 10_000;
/// Statements per sweep at most, so one sweep never runs long; the rest waits for the next.
const MAX_BATCHES: usize = 20;

impl<L: RunLauncher> Sweeper<L> {
    /// Writes the ticks that have come of paused schedules with a deadline as `SKIPPED`
    /// runs, then marks late the runs not `SUCCESS` by their deadline, as of `pinned`
    /// (tests) or the database's now, and sets the overdue gauge. Returns how many runs
    /// this call marked.
    ///
    /// # Errors
    /// [`crate::Error::Store`] when a statement fails, [`crate::Error::PausedTicks`] when
    /// writing the paused ticks does (that batch is rolled back).
    pub async fn mark_late(&self, pinned: Option<DateTime<Utc>>) -> Result<usize> {
        let mut written = 0;
        for _ in 0..MAX_BATCHES {
            let mut tx = Tx::begin(&self.pool).await?;
            let now = kairos_store::now(&mut *tx, pinned).await?;
            let limit = kairos_registrar::PAUSED_SCHEDULES_PER_PASS;
            let paused = kairos_registrar::record_paused_ticks(&mut tx, now, limit)
                .await
                .map_err(crate::Error::PausedTicks)?;
            tx.commit().await?;
            written += paused.written;
            if paused.schedules < limit as usize || written >= MAX_PAUSED_TICKS {
                break;
            }
        }
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
