//! The backlog gauges: how many due runs are still unpublished (the outbox), how
//! old the oldest is, and how many schedules are due for planning. One cheap statement,
//! read periodically, never on the claim path.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use crate::Result;

/// What is waiting, by the database's clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backlog {
    /// `PENDING` runs whose `fire_at` has come (due, not yet published).
    pub pending: i64,
    /// Seconds since the `fire_at` of the oldest of them; 0 when there is none.
    pub oldest_seconds: f64,
    /// Unpaused schedules whose `next_run_at` is within the planner's lookahead (what the
    /// planner's next pass would claim).
    pub schedules_due: i64,
}

/// The row [`backlog`] reads into a [`Backlog`].
#[derive(sqlx::FromRow)]
struct BacklogRow {
    pending: i64,
    oldest_seconds: f64,
    schedules_due: i64,
}

impl From<BacklogRow> for Backlog {
    fn from(row: BacklogRow) -> Backlog {
        Backlog {
            pending: row.pending,
            oldest_seconds: row.oldest_seconds,
            schedules_due: row.schedules_due,
        }
    }
}

/// Reads the backlog at the database's now (`pinned` in tests).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn backlog(
    db: impl PgExecutor<'_>,
    lookahead_s: f64,
    pinned: Option<DateTime<Utc>>,
) -> Result<Backlog> {
    // Both run counts are range scans of the partial index `schedule_runs_due` (fire_at
    // where status is 'PENDING' or 'RETRYING'; the RETRYING ones are filtered out), and the
    // schedule count one of `schedules_due`, so the cost follows the backlog, not the
    // history.
    let row: BacklogRow = sqlx::query_as(
        "with now as (select coalesce($1::timestamptz, clock_timestamp()) as at), \
         due as (select count(*) as n, min(fire_at) as oldest from schedule_runs, now \
                 where status = 'PENDING' and fire_at <= now.at) \
         select due.n as pending, \
           coalesce(extract(epoch from now.at - due.oldest), 0)::float8 as oldest_seconds, \
           (select count(*) from schedules \
            where not paused and next_run_at is not null \
              and next_run_at <= now.at + make_interval(secs => $2)) as schedules_due \
         from due, now",
    )
    .bind(pinned)
    .bind(lookahead_s)
    .fetch_one(db)
    .await?;
    Ok(row.into())
}
