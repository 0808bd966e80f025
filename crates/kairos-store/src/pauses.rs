//! Pauses that end by themselves (`paused_until`): which schedules a planner must resume
//! now, and when the next one is due. The resume itself is the registrar's, the same as a
//! caller's.

use chrono::{DateTime, Utc};
use kairos_core::Schedule;
use sqlx::PgExecutor;

use crate::Result;

/// Locks and returns up to `limit` paused schedules whose `paused_until` has come (`<=
/// now`), earliest first, skipping rows another transaction holds: two planners never
/// resume the same schedule, and a resumed one is no longer paused, so none resumes it
/// again.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn claim_pause_ends(
    db: impl PgExecutor<'_>,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<Schedule>> {
    crate::schedules::claim_where(
        db,
        "paused and paused_until is not null and paused_until <= $1",
        "paused_until",
        now,
        limit,
    )
    .await
}

/// The earliest `paused_until` of a paused schedule (when a planner must next resume one),
/// or `None`. One step down the partial index `schedules_paused_until`.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn earliest_pause_end(db: impl PgExecutor<'_>) -> Result<Option<DateTime<Utc>>> {
    Ok(sqlx::query_scalar(
        "select min(paused_until) from schedules where paused and paused_until is not null",
    )
    .fetch_one(db)
    .await?)
}
