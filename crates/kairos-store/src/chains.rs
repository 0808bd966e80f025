//! Statements on chain edges (`schedules.chain_parent`, set from an `@after` spec): what the
//! registrar's cycle check reads, and the lock that serializes writes of chained schedules.
//! The chained runs themselves are inserted by a trigger on `schedule_runs` (see
//! `migrations/20260114000000_control.sql`).

use sqlx::PgExecutor;

use crate::Result;

/// Every chain edge (child, parent) stored, for the registrar's cycle check. Only chained
/// schedules are read (a partial index holds them).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn chain_edges(db: impl PgExecutor<'_>) -> Result<Vec<(String, String)>> {
    Ok(sqlx::query_as(
        "select schedule_id, chain_parent from schedules where chain_parent is not null",
    )
    .fetch_all(db)
    .await?)
}

/// Serializes changes to chain edges (upserts and deploys that write a chained schedule),
/// so that two concurrent writes cannot each add half of a cycle. Held until the caller's
/// transaction ends.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn lock_chains(db: impl PgExecutor<'_>) -> Result<()> {
    sqlx::query("select pg_advisory_xact_lock(hashtext('kairos_chains'))")
        .execute(db)
        .await?;
    Ok(())
}
