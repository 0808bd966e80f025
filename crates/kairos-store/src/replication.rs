//! Whether a commit has reached a standby (docs/reliability.md, "A failover's lost tail").
//!
//! Under asynchronous streaming replication a primary acknowledges a commit before any
//! standby has it, and a failover loses what the new primary had not received. kairos can
//! re-derive its own writes (a plan is planned again, a publish is de-duplicated by the
//! stream), but not an executor's status report: once acknowledged it has left the status
//! stream. So the intake acknowledges a batch only once one standby has flushed its commit.
//! A server with no standby streaming answers at once.

use sqlx::PgPool;

use crate::Result;

/// Where the primary's WAL ended after a commit, and whether any standby streams from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// `pg_current_wal_lsn()` as text, at or past the commit's record.
    pub lsn: String,
    /// Standbys streaming from this server (`pg_stat_replication`, state `streaming`).
    pub standbys: i64,
}

/// The WAL position after every commit made so far on this server, and its streaming
/// standbys. Asked after a commit, on any connection of the same server.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails (no primary: a standby refuses it).
pub async fn written(db: &PgPool) -> Result<Written> {
    let (lsn, standbys): (String, i64) = sqlx::query_as(
        "select pg_current_wal_lsn()::text, \
           (select count(*) from pg_stat_replication where state = 'streaming')",
    )
    .fetch_one(db)
    .await?;
    Ok(Written { lsn, standbys })
}

/// Whether a standby has flushed WAL up to `lsn`. `None` when the flush positions cannot be
/// read (the role lacks `pg_monitor`: `pg_stat_replication` then hides them) or no standby
/// streams any more.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn flushed(db: &PgPool, lsn: &str) -> Result<Option<bool>> {
    Ok(sqlx::query_scalar(
        "select bool_or(flush_lsn >= $1::pg_lsn) from pg_stat_replication \
         where state = 'streaming' and flush_lsn is not null",
    )
    .bind(lsn)
    .fetch_one(db)
    .await?)
}
