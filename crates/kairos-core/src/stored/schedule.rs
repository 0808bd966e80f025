//! A stored schedule: every column the store reads back and writes.

use chrono::{DateTime, Utc};

use crate::{CalendarRules, CatchupPolicy, FailurePolicy, OverlapPolicy};

/// A schedule, as read back and as written: the store's `insert_many` and `update_many` set
/// every field but `scheduled_runs` (the planner's count), `pause_note`, `paused_until`
/// and `paused_by` (set by pausing)
/// and `updated_at` (now); an insert starts `revision` at 1, an update expects the one given.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Primary key.
    pub schedule_id: String,
    /// The workflow it launches.
    pub workflow_id: String,
    /// The workflow version it launches.
    pub version: i32,
    /// The user runs are launched as.
    pub user_id: String,
    /// The spec as written.
    pub cron_expr: String,
    /// IANA zone name.
    pub timezone: String,
    /// First instant a tick may fall on.
    pub start_at: Option<DateTime<Utc>>,
    /// Last instant a tick may fall on.
    pub end_at: Option<DateTime<Utc>>,
    /// The next tick to plan; `None` once exhausted.
    pub next_run_at: Option<DateTime<Utc>>,
    /// Paused schedules plan nothing.
    pub paused: bool,
    /// Jitter bound in milliseconds.
    pub jitter_ms: i32,
    /// What a tick does while an earlier run is in flight.
    pub overlap_policy: OverlapPolicy,
    /// What happens to ticks older than the misfire grace.
    pub catchup_policy: CatchupPolicy,
    /// Higher dispatches first.
    pub priority: i32,
    /// In-flight limit in seconds, if any.
    pub max_run_seconds: Option<i32>,
    /// Under overlap `queue`: most runs waiting (`QUEUED`); `None`: unbounded.
    pub max_queued: Option<i32>,
    /// Under an exclusive overlap policy: most runs in flight at once (`None`: one).
    pub max_in_flight: Option<i32>,
    /// What happens when an attempt fails or stops answering.
    pub failure: FailurePolicy,
    /// Exclusions, calendars, roll and DST policy.
    pub rules: CalendarRules,
    /// Most runs the planner creates for it (`None`: no limit); manual, backfill and chain
    /// runs do not count.
    pub max_runs: Option<i32>,
    /// Seconds after its tick by which each planned run must be final (`None`: no
    /// deadline); a run that misses it is marked late.
    pub deadline_s: Option<i32>,
    /// The region its runs launch in (`None`: the launch stream without a region).
    pub region: Option<String>,
    /// Where its runs launch, in order, while `region`'s launch stream is unavailable.
    pub fallback_regions: Vec<String>,
    /// Runs the planner created so far (what `max_runs` counts).
    pub scheduled_runs: i64,
    /// Why it is paused, as the pausing caller wrote it (`None` while it runs).
    pub pause_note: Option<String>,
    /// When a paused schedule resumes by itself (`None`: not paused, or until resumed).
    pub paused_until: Option<DateTime<Utc>>,
    /// Who paused it (`None` while it runs).
    pub paused_by: Option<String>,
    /// Optimistic-concurrency counter, incremented by every write.
    pub revision: i64,
    /// When the row was first written (the `@every` anchor when no `start_at`).
    pub created_at: DateTime<Utc>,
    /// When the row was last written.
    pub updated_at: DateTime<Utc>,
}

impl Schedule {
    /// How many more runs the planner may create (`None`: no limit).
    pub fn remaining_runs(&self) -> Option<i64> {
        self.max_runs
            .map(|max| (i64::from(max) - self.scheduled_runs).max(0))
    }
}
