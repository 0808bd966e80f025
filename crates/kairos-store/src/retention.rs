//! Retention of run history: deleting finished runs that are older than the
//! retention period and beyond the newest `keep_last` runs of their schedule.
//!
//! One call of [`delete_batch`] is one statement, so (outside a caller's transaction) one
//! short transaction that deletes at most `limit` rows. It never waits for a lock: victims
//! are locked with `for update skip locked`, so a row a status callback holds is left for a
//! later batch, and it never touches a run that is not terminal (`PENDING`, `QUEUED`,
//! `ENQUEUED`, `STARTED`): the status filter is evaluated again on the locked row. Terminal
//! runs sit in none of the hot partial indexes (`schedule_runs_pending`, `_in_flight`,
//! `_queued`), so deleting them costs the planner's and dispatcher's claims nothing.
//!
//! Runs of deleted schedules are history like any other: they stay until this removes them
//! by the same rule (there is no foreign key to cascade).
//!
//! Cost: candidates are found by a sequential scan that stops after `limit` matches; old rows
//! sit early in the heap (and in the oldest partitions), so a batch with work is cheap, and a
//! pass that finds nothing reads the table once. `schedule_runs` is partitioned by day of
//! `run_at`: a whole old day is dropped instead when nothing in it must be kept
//! ([`crate::partitions::drop_old`]); this row delete is the fallback for the rest (days
//! holding a kept run, and the default partition).

use chrono::{DateTime, Utc};
use kairos_core::RunStatus;
use sqlx::PgExecutor;

use crate::Result;

/// Which runs one batch may delete. No `Default`: every caller states the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionRule {
    /// Runs whose tick (`run_at`) and last change (`updated_at`) are both before this are old.
    pub older_than: DateTime<Utc>,
    /// The newest `keep_last` runs of each schedule (by `run_at`, any status) are kept
    /// however old they are; 0 keeps none.
    pub keep_last: u32,
    /// Most rows one batch deletes.
    pub limit: u32,
}

/// Deletes at most `rule.limit` old terminal runs in one statement. Returns how many it
/// deleted; fewer than the limit means nothing more was deletable (or locked) just now.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn delete_batch(db: impl PgExecutor<'_>, rule: &RetentionRule) -> Result<u64> {
    // The keep_last boundary of a candidate's schedule is the run_at of its keep_last-th
    // newest run, read from `schedule_runs_schedule` (at most keep_last index entries). A
    // schedule with fewer runs has no boundary (NULL), so nothing of it is deleted. Ties on
    // run_at with the boundary are kept (strict <), which can only keep more.
    // A deleted run's attempts, logs and retry requests go with it, in the same statement (and its
    // ledger row in `run_keys`, if it has one, by a trigger). Victims are named by primary
    // key, (idempotency_key, run_at), so each delete probes one partition.
    let deleted: i64 = sqlx::query_scalar(
        "with gone as ( \
           delete from schedule_runs d where (d.idempotency_key, d.run_at) in ( \
             select r.idempotency_key, r.run_at from schedule_runs r \
             where r.status = any($4) and r.run_at < $1 and r.updated_at < $1 \
               and ($2 = 0 or r.run_at < ( \
                 select k.run_at from schedule_runs k where k.schedule_id = r.schedule_id \
                 order by k.run_at desc offset greatest($2 - 1, 0) limit 1)) \
             limit $3 \
             for update of r skip locked \
           ) and d.status = any($4) \
           returning d.idempotency_key \
         ), attempts as ( \
           delete from run_attempts a using gone where a.idempotency_key = gone.idempotency_key \
         ), logs as ( \
           delete from run_logs l using gone where l.idempotency_key = gone.idempotency_key \
         ), requests as ( \
           delete from run_retry_requests q using gone \
           where q.idempotency_key = gone.idempotency_key \
         ) \
         select count(*) from gone",
    )
    .bind(rule.older_than)
    .bind(i64::from(rule.keep_last))
    .bind(i64::from(rule.limit))
    .bind(terminal_names())
    .fetch_one(db)
    .await?;
    Ok(u64::try_from(deleted).unwrap_or(0))
}

/// The names of the statuses a run never leaves (except `CANCELLED`, which a resume may
/// bring back for a tick that is still in the future; such a tick is never older than the
/// retention period): the only rows retention may delete.
pub(crate) fn terminal_names() -> Vec<&'static str> {
    RunStatus::ALL
        .into_iter()
        .filter(|status| status.terminal())
        .map(RunStatus::as_str)
        .collect()
}
