//! A schedule's run statistics (`GET /schedules/{id}`), as `kairos_store::stats` reads
//! them over its newest runs.

use chrono::{DateTime, Utc};

use crate::RunStatus;

/// A run that reached the stream, or a run that did not, as the statistics name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRef {
    /// The planned tick.
    pub run_at: DateTime<Utc>,
    /// Its status now.
    pub status: RunStatus,
    /// Why it was skipped, cancelled or failed (for a launched run: `None` unless it failed).
    pub reason: Option<String>,
    /// The last launch or run error.
    pub last_error: Option<String>,
}

/// A schedule's statistics over its newest runs (at most a window of them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleStats {
    /// The newest launched run (published to the stream, or reported on by an executor):
    /// its tick is the "last fire", its status the "last status".
    pub last_fire: Option<RunRef>,
    /// The newest tick that did not launch: `SKIPPED`, `CANCELLED`, or `FAILED` without
    /// ever being published (permanent launch error, launch deadline).
    pub last_not_launched: Option<RunRef>,
    /// Ticks the planner counted as missed and did not fire (`schedules.missed_ticks`, all
    /// time; 0 once the schedule is deleted).
    pub missed_ticks: i64,
    /// `SKIPPED` runs among the runs examined.
    pub skipped_ticks: i64,
    /// How many runs the run-derived fields looked at: the newest, at most the window.
    pub runs_examined: i64,
    /// Why the planner parked the schedule (its stored spec no longer parses), if it did.
    pub planner_error: Option<String>,
}

impl ScheduleStats {
    /// The "why" of the last tick that did not launch: the planner's error while the
    /// schedule is parked (nothing launches then), else the reason written on the newest
    /// run that did not launch (its last error when no reason was written).
    pub fn why(&self) -> Option<String> {
        if let Some(error) = &self.planner_error {
            return Some(format!("planner_error: {error}"));
        }
        let run = self.last_not_launched.as_ref()?;
        let detail = run.reason.as_deref().or(run.last_error.as_deref());
        Some(match detail {
            Some(detail) => format!("{}: {detail}", run.status),
            None => run.status.to_string(),
        })
    }
}
