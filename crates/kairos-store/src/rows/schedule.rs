//! A `schedules` row read into [`Schedule`], and its failure columns into [`FailurePolicy`]
//! (also read beside a run, from its schedule).

use kairos_core::{FailurePolicy, Schedule};
use sqlx::postgres::PgRow;
use sqlx::{FromRow, Row};

use super::{named, RulesRow};

/// Every column of `schedules` that [`Schedule`] holds.
pub(crate) struct ScheduleRow(pub(crate) Schedule);

impl<'r> FromRow<'r, PgRow> for ScheduleRow {
    fn from_row(row: &'r PgRow) -> sqlx::Result<Self> {
        Ok(ScheduleRow(Schedule {
            schedule_id: row.try_get("schedule_id")?,
            workflow_id: row.try_get("workflow_id")?,
            version: row.try_get("version")?,
            user_id: row.try_get("user_id")?,
            cron_expr: row.try_get("cron_expr")?,
            timezone: row.try_get("timezone")?,
            start_at: row.try_get("start_at")?,
            end_at: row.try_get("end_at")?,
            next_run_at: row.try_get("next_run_at")?,
            paused: row.try_get("paused")?,
            jitter_ms: row.try_get("jitter_ms")?,
            overlap_policy: named(row, "overlap_policy")?,
            catchup_policy: named(row, "catchup_policy")?,
            priority: row.try_get("priority")?,
            max_run_seconds: row.try_get("max_run_seconds")?,
            max_queued: row.try_get("max_queued")?,
            max_in_flight: row.try_get("max_in_flight")?,
            failure: FailureRow::from_row(row)?.0,
            rules: RulesRow::from_row(row)?.0,
            max_runs: row.try_get("max_runs")?,
            deadline_s: row.try_get("deadline_s")?,
            region: row.try_get("region")?,
            fallback_regions: row.try_get("fallback_regions")?,
            scheduled_runs: row.try_get("scheduled_runs")?,
            pause_note: row.try_get("pause_note")?,
            paused_until: row.try_get("paused_until")?,
            paused_by: row.try_get("paused_by")?,
            revision: row.try_get("revision")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
        }))
    }
}

impl From<ScheduleRow> for Schedule {
    fn from(row: ScheduleRow) -> Schedule {
        row.0
    }
}

/// The failure columns (`max_attempts`, `retry_*`, `heartbeat_timeout_s`,
/// `start_timeout_s`).
pub(crate) struct FailureRow(pub(crate) FailurePolicy);

impl<'r> FromRow<'r, PgRow> for FailureRow {
    fn from_row(row: &'r PgRow) -> sqlx::Result<Self> {
        Ok(FailureRow(FailurePolicy {
            max_attempts: row.try_get("max_attempts")?,
            retry_intervals_s: row.try_get("retry_intervals_s")?,
            retry_backoff_initial_s: row.try_get("retry_backoff_initial_s")?,
            retry_backoff_multiplier: row.try_get("retry_backoff_multiplier")?,
            retry_backoff_max_s: row.try_get("retry_backoff_max_s")?,
            heartbeat_timeout_s: row.try_get("heartbeat_timeout_s")?,
            start_timeout_s: row.try_get("start_timeout_s")?,
        }))
    }
}

impl From<FailureRow> for FailurePolicy {
    fn from(row: FailureRow) -> FailurePolicy {
        row.0
    }
}
