//! A `schedule_runs` row read into [`Run`], and a `run_attempts` row into [`Attempt`].

use kairos_core::{Attempt, Run};
use sqlx::postgres::PgRow;
use sqlx::{FromRow, Row};

use super::named;

/// Every column of `schedule_runs` that [`Run`] holds (`crate::runs::RUN_COLUMNS`).
pub(crate) struct RunRow(pub(crate) Run);

impl<'r> FromRow<'r, PgRow> for RunRow {
    fn from_row(row: &'r PgRow) -> sqlx::Result<Self> {
        Ok(RunRow(Run {
            idempotency_key: row.try_get("idempotency_key")?,
            schedule_id: row.try_get("schedule_id")?,
            run_at: row.try_get("run_at")?,
            fire_at: row.try_get("fire_at")?,
            status: named(row, "status")?,
            source: named(row, "source")?,
            workflow_id: row.try_get("workflow_id")?,
            version: row.try_get("version")?,
            user_id: row.try_get("user_id")?,
            run_id: row.try_get("run_id")?,
            attempts: row.try_get("attempts")?,
            attempt: row.try_get("attempt")?,
            heartbeat_at: row.try_get("heartbeat_at")?,
            dead_lettered_at: row.try_get("dead_lettered_at")?,
            reason: row.try_get("reason")?,
            last_error: row.try_get("last_error")?,
            published_at: row.try_get("published_at")?,
            stream_seq: row.try_get("stream_seq")?,
            started_at: row.try_get("started_at")?,
            finished_at: row.try_get("finished_at")?,
            executor_id: row.try_get("executor_id")?,
            parent_key: row.try_get("parent_key")?,
            deadline_at: row.try_get("deadline_at")?,
            late_at: row.try_get("late_at")?,
            late_reason: row.try_get("late_reason")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
            schedule_revision: row.try_get("schedule_revision")?,
            launch_region: row.try_get("launch_region")?,
        }))
    }
}

impl From<RunRow> for Run {
    fn from(row: RunRow) -> Run {
        row.0
    }
}

/// A row of `run_attempts`.
pub(crate) struct AttemptRow(pub(crate) Attempt);

impl<'r> FromRow<'r, PgRow> for AttemptRow {
    fn from_row(row: &'r PgRow) -> sqlx::Result<Self> {
        Ok(AttemptRow(Attempt {
            attempt: row.try_get("attempt")?,
            status: named(row, "status")?,
            error: row.try_get("error")?,
            executor_id: row.try_get("executor_id")?,
            run_id: row.try_get("run_id")?,
            published_at: row.try_get("published_at")?,
            started_at: row.try_get("started_at")?,
            finished_at: row.try_get("finished_at")?,
        }))
    }
}

impl From<AttemptRow> for Attempt {
    fn from(row: AttemptRow) -> Attempt {
        row.0
    }
}
