//! A stored run (one row of `schedule_runs`), one finished attempt of it, and the filter of
//! run listings.

use chrono::{DateTime, Utc};

use crate::{RunSource, RunStatus};

/// One row of `schedule_runs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// `RunKey` as hex; primary key.
    pub idempotency_key: String,
    /// The schedule it belongs (or belonged) to.
    pub schedule_id: String,
    /// The planned tick.
    pub run_at: DateTime<Utc>,
    /// The tick plus jitter.
    pub fire_at: DateTime<Utc>,
    /// Where it is in its lifecycle.
    pub status: RunStatus,
    /// What created it.
    pub source: RunSource,
    /// The workflow as launched.
    pub workflow_id: String,
    /// The workflow version as launched.
    pub version: i32,
    /// The user as launched.
    pub user_id: String,
    /// The executor's run id.
    pub run_id: Option<String>,
    /// Publish attempts so far (every try to hand a message to the stream).
    pub attempts: i32,
    /// The attempt in progress (1 until an attempt failed and was retried).
    pub attempt: i32,
    /// The executor's last heartbeat in this attempt.
    pub heartbeat_at: Option<DateTime<Utc>>,
    /// When its last attempt failed for good.
    pub dead_lettered_at: Option<DateTime<Utc>>,
    /// Why it was skipped, cancelled or failed.
    pub reason: Option<String>,
    /// The last launch or run error.
    pub last_error: Option<String>,
    /// When JetStream acknowledged it.
    pub published_at: Option<DateTime<Utc>>,
    /// Its stream sequence number.
    pub stream_seq: Option<i64>,
    /// When the executor reported STARTED.
    pub started_at: Option<DateTime<Utc>>,
    /// When it reached a final status.
    pub finished_at: Option<DateTime<Utc>>,
    /// The executor that reported on it.
    pub executor_id: Option<String>,
    /// For a chained run (source `chain`): the key of the parent's run that fired it.
    pub parent_key: Option<String>,
    /// By when it must be final (`run_at` plus its schedule's `deadline_s` when the tick was
    /// planned); `None`: no deadline.
    pub deadline_at: Option<DateTime<Utc>>,
    /// When the sweep found it late (its deadline passed and it had not ended `SUCCESS` by
    /// then); a mark, not a status.
    pub late_at: Option<DateTime<Utc>>,
    /// Why it is late: what it did by its deadline.
    pub late_reason: Option<String>,
    /// When the row was written.
    pub created_at: DateTime<Utc>,
    /// When the row last changed.
    pub updated_at: DateTime<Utc>,
    /// The schedule's revision when the run was written (the one that produced it); never
    /// changed afterwards. `None` for runs of no schedule and runs written before it was kept.
    pub schedule_revision: Option<i64>,
    /// The region its launch went to, fixed when the launch was first recorded (`None`:
    /// not launched yet, or launched without a region).
    pub launch_region: Option<String>,
}

/// One finished attempt of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// 1, 2, ...
    pub attempt: i32,
    /// `SUCCESS`, `FAILED` or `TIMED_OUT`.
    pub status: RunStatus,
    /// What the executor reported, or why it timed out.
    pub error: Option<String>,
    /// The executor that ran it.
    pub executor_id: Option<String>,
    /// The executor's run id.
    pub run_id: Option<String>,
    /// When its launch message was acknowledged.
    pub published_at: Option<DateTime<Utc>>,
    /// When the executor reported it started.
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended.
    pub finished_at: DateTime<Utc>,
}

/// Filters of the newest runs and of the runs in flight (`kairos_store::overview`);
/// `None` means "any".
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    /// Only runs in this status (ignored for runs in flight).
    pub status: Option<RunStatus>,
    /// Only this schedule's runs.
    pub schedule_id: Option<String>,
    /// Only this workflow's runs.
    pub workflow_id: Option<String>,
    /// Page size.
    pub limit: i64,
}
