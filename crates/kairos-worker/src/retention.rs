//! The retention loop: deletes finished runs older than `history.retention_days`
//! and beyond the newest `history.keep_last` of their schedule, in bounded batches, and keeps
//! the daily partitions of `schedule_runs`.
//!
//! One pass reads the database clock once; the first pass and then one an hour at most
//! ([`PARTITION_INTERVAL`]) make the partitions of today and the
//! `history.partition_days_ahead` days after it and drop every old day that holds nothing to
//! keep ([`kairos_store::partitions::drop_old`]: one statement per day instead of a delete per
//! run). Every pass then deletes what is left (days holding a kept run, the default partition) in
//! batches of at most `batch_size` rows
//! ([`kairos_store::retention::delete_batch`], one statement = one short transaction each)
//! until a batch comes back short or `max_batches` were done, pausing `batch_pause` between
//! batches so the planner and dispatcher keep the database's attention. Batches never wait
//! for a lock (`skip locked`) and never touch unfinished runs, so retention cannot block or
//! disturb the hot path; every instance may run it at once.
//!
//! Each pass also deletes the changes of the history of changes (the audit log) older than
//! `history.audit_retention_days`, in batches the same way.
//!
//! Time: what is "old" is decided with the database's now (invariant "the database clock
//! decides"); the instance's clock only measures the sleep between passes.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration as StdDuration, Instant};

use chrono::{DateTime, Duration, Utc};
use kairos_store::partitions;
use kairos_store::retention::{self, RetentionRule};
use kairos_store::PgPool;

/// Retention's knobs (from `[history]`). No `Default`: every caller states them.
#[derive(Debug, Clone)]
pub struct RetentionConfig {
    /// Finished runs older than this are deleted (`retention_days`).
    pub retention: Duration,
    /// ...except the newest `keep_last` runs of each schedule (0 keeps none).
    pub keep_last: u32,
    /// Most rows one batch deletes.
    pub batch_size: u32,
    /// Most batches in one pass (bounds a pass after a long stop).
    pub max_batches: u32,
    /// Sleep between batches of one pass.
    pub batch_pause: StdDuration,
    /// Sleep between passes.
    pub interval: StdDuration,
    /// Daily partitions of `schedule_runs` made ahead of today (`partition_days_ahead`).
    pub partition_days_ahead: u32,
    /// Fixes the database "now" (tests only); `None` in production.
    pub pinned_now: Option<DateTime<Utc>>,
    /// Changes in the history of changes older than this are deleted
    /// (`audit_retention_days`).
    pub audit_retention: Duration,
}

/// Why a retention call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database failed; batches already committed stay deleted.
    #[error("retention store call failed")]
    Store(#[from] kairos_store::Error),
}

/// Result of retention calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What one pass did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassReport {
    /// The database's now (or the pinned one) the pass measured age with.
    pub now: DateTime<Utc>,
    /// Batches run (including the last, short one).
    pub batches: u32,
    /// Rows deleted one by one.
    pub deleted: u64,
    /// Old days dropped whole.
    pub days_dropped: u32,
    /// Runs those days held.
    pub dropped: u64,
    /// True when the pass stopped at `max_batches` with work left.
    pub more: bool,
    /// Changes deleted from the history of changes.
    pub changes_deleted: u64,
}

/// The retention loop over one pool. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Retention {
    pool: PgPool,
    config: RetentionConfig,
    /// When this loop last did its partition work (shared by clones).
    partitions_at: Arc<Mutex<Option<Instant>>>,
}

/// Partition work (days ahead, old days dropped) runs on the first pass and then at most this
/// often: an old day that must be kept is read whole to find that out, so it is not re-read on
/// every pass.
pub const PARTITION_INTERVAL: StdDuration = StdDuration::from_secs(3600);

impl Retention {
    /// A retention loop deleting from `pool`.
    pub fn new(pool: PgPool, config: RetentionConfig) -> Retention {
        Retention {
            pool,
            config,
            partitions_at: Arc::new(Mutex::new(None)),
        }
    }

    /// Runs passes until `shutdown` resolves, `interval` apart (at once again when a pass
    /// stopped at `max_batches` with work left). Shutdown is checked between batches.
    ///
    /// # Errors
    /// None so far: database failures are logged and retried after `interval`.
    #[tracing::instrument(name = "retention", skip_all)]
    pub async fn run(&self, shutdown: impl Future<Output = ()>) -> Result<()> {
        tokio::pin!(shutdown);
        tracing::info!(
            retention_days = self.config.retention.num_days(),
            keep_last = self.config.keep_last,
            batch_size = self.config.batch_size,
            "retention started"
        );
        loop {
            let pause = tokio::select! {
                biased;
                () = &mut shutdown => break,
                report = self.pass() => match report {
                    Ok(report) if report.more => StdDuration::ZERO,
                    Ok(_) => self.config.interval,
                    Err(err) => {
                        if !crate::outage::failed("retention", &err) {
                            tracing::warn!(error = %crate::error_chain(&err), "retention pass failed");
                        }
                        self.config.interval
                    }
                },
            };
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                () = tokio::time::sleep(pause) => {}
            }
        }
        tracing::info!("retention stopped");
        Ok(())
    }

    /// Whether this pass does the partition work (and notes that it does).
    fn partitions_due(&self) -> bool {
        let mut last = self
            .partitions_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let due = last.is_none_or(|at| at.elapsed() >= PARTITION_INTERVAL);
        if due {
            *last = Some(Instant::now());
        }
        due
    }

    /// Makes the days ahead and drops old days whole. Never stops the row deletes that
    /// follow: a day not made or not dropped only costs speed (its runs sit in the default
    /// partition, or go row by row).
    async fn partition_work(
        &self,
        now: DateTime<Utc>,
        rule: &RetentionRule,
        report: &mut PassReport,
    ) {
        if let Err(err) = create_partitions(&self.pool, now, self.config.partition_days_ahead).await
        {
            tracing::warn!(error = %crate::error_chain(&err), "run partitions not created");
        }
        match partitions::drop_old(&self.pool, rule).await {
            Ok(days) => {
                report.days_dropped = u32::try_from(days.dropped.len()).unwrap_or(u32::MAX);
                report.dropped = days.runs;
                if !days.dropped.is_empty() {
                    tracing::info!(days = ?days.dropped, runs = days.runs,
                        older_than = %rule.older_than, "old days of runs dropped");
                }
            }
            Err(err) => {
                let err = Error::from(err);
                tracing::warn!(error = %crate::error_chain(&err), "old days of runs not dropped");
            }
        }
    }

    /// One pass: batches until one comes back short or `max_batches` were run. Dropping the
    /// future between batches is safe: every batch is its own committed statement.
    ///
    /// # Errors
    /// [`Error::Store`] when a statement fails (earlier batches stay deleted).
    pub async fn pass(&self) -> Result<PassReport> {
        let now = kairos_store::now(&self.pool, self.config.pinned_now).await?;
        let rule = RetentionRule {
            older_than: now - self.config.retention,
            keep_last: self.config.keep_last,
            // Invariant: a batch deletes at least one row, so a pass always ends.
            limit: self.config.batch_size.max(1),
        };
        let mut report = PassReport {
            now,
            batches: 0,
            deleted: 0,
            days_dropped: 0,
            dropped: 0,
            more: false,
            changes_deleted: 0,
        };
        if self.partitions_due() {
            self.partition_work(now, &rule, &mut report).await;
        }
        while report.batches < self.config.max_batches {
            if report.batches > 0 {
                tokio::time::sleep(self.config.batch_pause).await;
            }
            let deleted = retention::delete_batch(&self.pool, &rule).await?;
            report.batches += 1;
            report.deleted += deleted;
            if deleted < u64::from(rule.limit) {
                break;
            }
            report.more = report.batches == self.config.max_batches;
        }
        // Skips of ticks older than the period: the record of why those ticks did not run
        // goes with their runs. One statement of at most one batch per pass.
        let limit = i64::from(rule.limit);
        let skips = kairos_store::skips::delete_old(&self.pool, rule.older_than, limit).await?;
        if skips > 0 {
            tracing::info!(deleted = skips, older_than = %rule.older_than, "old skips deleted");
        }
        if report.deleted > 0 {
            tracing::info!(
                deleted = report.deleted,
                batches = report.batches,
                older_than = %rule.older_than,
                "old runs deleted"
            );
        }
        report.changes_deleted = self.delete_old_changes(now, rule.limit).await?;
        Ok(report)
    }

    /// Deletes the changes older than `audit_retention` from the history of changes, in
    /// batches of at most `limit` (each its own short statement), at most `max_batches`.
    async fn delete_old_changes(&self, now: DateTime<Utc>, limit: u32) -> Result<u64> {
        let older_than = now - self.config.audit_retention;
        let mut deleted = 0;
        for batch in 0..self.config.max_batches {
            if batch > 0 {
                tokio::time::sleep(self.config.batch_pause).await;
            }
            let gone = kairos_store::history::delete_before(&self.pool, older_than, limit).await?;
            deleted += gone;
            if gone < u64::from(limit) {
                break;
            }
        }
        if deleted > 0 {
            tracing::info!(deleted, %older_than, "old changes deleted from the history");
        }
        Ok(deleted)
    }
}

/// Makes the daily partitions of `schedule_runs` for the day of `now` and the `days_ahead`
/// days after it (idempotent; the planner role calls it at start, retention on its first pass
/// and then at most every [`PARTITION_INTERVAL`]).
/// A day whose runs already sit in the default partition is left there, logged once per
/// call: correctness never depends on a partition existing.
///
/// # Errors
/// [`Error::Store`] when a statement fails (for instance its lock was not granted in time).
pub async fn create_partitions(
    pool: &PgPool,
    now: DateTime<Utc>,
    days_ahead: u32,
) -> Result<partitions::Ahead> {
    let ahead = partitions::create_ahead(pool, now, days_ahead).await?;
    if !ahead.created.is_empty() {
        tracing::info!(days = ?ahead.created, "run partitions created");
    }
    if !ahead.in_default.is_empty() {
        tracing::warn!(days = ?ahead.in_default,
            "runs of these days are in the default partition; no daily partition made for them");
    }
    Ok(ahead)
}
