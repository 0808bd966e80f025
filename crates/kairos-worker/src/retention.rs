//! The retention loop (issue 5): deletes finished runs older than `history.retention_days`
//! and beyond the newest `history.keep_last` of their schedule, in bounded batches.
//!
//! One pass reads the database clock once, then deletes batches of at most `batch_size` rows
//! ([`kairos_store::retention::delete_batch`], one statement = one short transaction each)
//! until a batch comes back short or `max_batches` were done, pausing `batch_pause` between
//! batches so the planner and dispatcher keep the database's attention. Batches never wait
//! for a lock (`skip locked`) and never touch unfinished runs, so retention cannot block or
//! disturb the hot path; every instance may run it at once.
//!
//! Time: what is "old" is decided with the database's now (invariant 3); the instance's
//! clock only measures the sleep between passes.

use std::future::Future;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
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
    /// Fixes the database "now" (tests only); `None` in production.
    pub pinned_now: Option<DateTime<Utc>>,
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
    /// Rows deleted.
    pub deleted: u64,
    /// True when the pass stopped at `max_batches` with work left.
    pub more: bool,
}

/// The retention loop over one pool. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Retention {
    pool: PgPool,
    config: RetentionConfig,
}

impl Retention {
    /// A retention loop deleting from `pool`.
    pub fn new(pool: PgPool, config: RetentionConfig) -> Retention {
        Retention { pool, config }
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
                        tracing::warn!(error = %crate::error_chain(&err), "retention pass failed");
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
            more: false,
        };
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
        if report.deleted > 0 {
            tracing::info!(
                deleted = report.deleted,
                batches = report.batches,
                older_than = %rule.older_than,
                "old runs deleted"
            );
        }
        Ok(report)
    }
}
