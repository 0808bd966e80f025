//! Run deadlines: a planned tick of a schedule with `deadline_s` must be final by
//! its `deadline_at` (`run_at + deadline_s`, fixed when the planner wrote it). The sweeper
//! judges each such run once its deadline has passed, on the database clock: a run that had
//! not ended `SUCCESS` by then — still unfinished, ended after it, or ended any other way
//! (skipped, failed to launch, cancelled by a pause) — is marked late (`late_at`, with a
//! `late_reason`). Late is a mark, never a status: nothing stops the run.
//!
//! Only runs whose deadline is open are visited (the partial index
//! `schedule_runs_deadline_open`): a run leaves it once judged on time, or once it is late
//! and final. Every judgment locks its rows `FOR UPDATE SKIP LOCKED`, and a run is marked
//! only while `late_at` is null, so several sweepers mark each late run exactly once.

use chrono::{DateTime, Utc};
use kairos_core::Run;
use sqlx::{PgConnection, PgExecutor};

use crate::Result;

/// A run the sweep found late.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Late {
    /// The run's key.
    pub idempotency_key: String,
    /// Its schedule.
    pub schedule_id: String,
    /// Why it is late.
    pub late_reason: String,
}

/// What one [`judge`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Judged {
    /// Runs judged (late, on time, or late and now final): a full batch means there may be
    /// more.
    pub judged: u64,
    /// The runs marked late by this call.
    pub late: Vec<Late>,
}

/// `expr` (a `timestamptz`) as RFC 3339 UTC text, in SQL.
fn utc(expr: &str) -> String {
    format!("to_char({expr} at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')")
}

/// Judges up to `limit` runs whose deadline is open and at or before `now`, oldest deadline
/// first: marks late those that had not ended `SUCCESS` by it (at `now`, with the reason),
/// and closes the deadline of those judged on time and of late runs that are final now.
/// Late runs still unfinished are left open (and not written again) until they end.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn judge(tx: &mut PgConnection, now: DateTime<Utc>, limit: i64) -> Result<Judged> {
    let terminal = &*crate::groups::TERMINAL;
    let deadline = utc("r.deadline_at");
    let finished = utc("r.finished_at");
    let sql = format!(
        "with due as ( \
           select idempotency_key, run_at, \
             late_at is null \
               and not (status = 'SUCCESS' \
                        and coalesce(finished_at <= deadline_at, false)) as newly_late \
           from schedule_runs \
           where deadline_open and deadline_at <= $1 \
             and (late_at is null or status in {terminal}) \
           order by deadline_at limit $2 \
           for update skip locked \
         ), judged as ( \
           update schedule_runs r set \
             late_at = case when due.newly_late then $1 else r.late_at end, \
             late_reason = case when not due.newly_late then r.late_reason \
               when r.status not in {terminal} then format( \
                 '%s and not final at its deadline %s', r.status, {deadline}) \
               when r.finished_at > r.deadline_at then format( \
                 'ended %s at %s, %s after its deadline %s', r.status, {finished}, \
                 date_trunc('second', r.finished_at - r.deadline_at), {deadline}) \
               else format('ended %s%s%s: not SUCCESS by its deadline %s', r.status, \
                 coalesce(' at ' || {finished}, ''), coalesce(' (' || r.reason || ')', ''), \
                 {deadline}) end, \
             deadline_open = r.status not in {terminal} \
           from due \
           where r.idempotency_key = due.idempotency_key and r.run_at = due.run_at \
           returning r.idempotency_key, r.schedule_id, due.newly_late, r.late_reason \
         ) \
         select idempotency_key, schedule_id, newly_late, coalesce(late_reason, '') \
         from judged"
    );
    let rows: Vec<(String, String, bool, String)> = sqlx::query_as(&sql)
        .bind(now)
        .bind(limit)
        .fetch_all(tx)
        .await?;
    let judged = rows.len() as u64;
    let late = rows
        .into_iter()
        .filter(|(_, _, late, _)| *late)
        .map(|(idempotency_key, schedule_id, _, late_reason)| Late {
            idempotency_key,
            schedule_id,
            late_reason,
        })
        .collect();
    Ok(Judged { judged, late })
}

/// How many runs are past their deadline and not final at `now` (the `kairos_runs_overdue`
/// gauge), read on the sweep's partial index.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn overdue(db: impl PgExecutor<'_>, now: DateTime<Utc>) -> Result<i64> {
    let sql = format!(
        "select count(*) from schedule_runs \
         where deadline_open and deadline_at <= $1 and status not in {}",
        *crate::groups::TERMINAL
    );
    Ok(sqlx::query_scalar(&sql).bind(now).fetch_one(db).await?)
}

/// Filters of [`late_runs`].
pub type LateFilter = crate::marked_runs::MarkedFilter;

/// Late runs, newest mark first (keyset pagination on the partial index
/// `schedule_runs_late`).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn late_runs(db: impl PgExecutor<'_>, filter: &LateFilter) -> Result<Vec<Run>> {
    crate::marked_runs::list(db, crate::marked_runs::Mark::Late, filter).await
}
