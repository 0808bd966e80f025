//! Executor status reports, applied a batch at a time: [`lock`] takes the batch's runs (one
//! statement among the recent partitions, a second for keys not found there), the caller
//! decides each report with `kairos_core::judge` in order, and
//! [`write`] records every changed run, every attempt that ended other than in `SUCCESS` (a
//! run's `SUCCESS` attempt is its last, and its row keeps it: [`crate::attempts::history`]
//! reads it from there), and the release of the next
//! `QUEUED` run of each exclusive schedule whose run ended, and the logs reported (one
//! statement each, `unnest` of the batch). Both run in the caller's transaction, so a batch is recorded whole or not at
//! all.
//!
//! A run another transaction holds (a dispatcher's claim that has not committed, another
//! instance's batch) is not waited for: [`lock`] skips it and names it in [`Locked::busy`]
//! (with its holder's transaction in [`Locked::holding`] when it can be told), and the
//! caller tries those reports again in a later batch, once [`ended`] says the holder is over
//! or a timer runs out. So one held row never stalls a batch of thousands.

use chrono::{DateTime, Utc};
use kairos_core::{Attempt, Run, RunStatus};
use sqlx::PgConnection;

pub use crate::run_logs::ReportedLog;
use crate::Result;

mod lock;
pub use lock::{ended, lock, Holders, Locked, LockedRun, RECENT_AFTER, RECENT_BEFORE};

/// A run whose row the batch changed: its new state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// The run as it is to be written (every column a report may change).
    pub run: Run,
    /// Its `exclusive` column (set when a report moved a `PENDING` run in flight).
    pub exclusive: bool,
}

/// An attempt that a report ended (`SUCCESS` or `FAILED`), for `run_attempts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishedAttempt {
    /// The run.
    pub idempotency_key: String,
    /// The attempt, as `run_attempts` keeps it.
    pub attempt: Attempt,
}

/// What a batch writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Writes {
    /// Changed runs.
    pub changed: Vec<Changed>,
    /// Attempts ended.
    pub attempts: Vec<FinishedAttempt>,
    /// Exclusive schedules whose run ended: each releases its oldest `QUEUED` run.
    pub release: Vec<String>,
    /// Logs reported, at most one entry per attempt.
    pub logs: Vec<ReportedLog>,
}

/// Records `writes` at `now`; returns how many `QUEUED` runs it released (dispatchers are
/// woken when any were).
///
/// # Errors
/// [`crate::Error::Database`] when a statement fails.
pub async fn write(db: &mut PgConnection, writes: &Writes, now: DateTime<Utc>) -> Result<u64> {
    update_runs(db, &writes.changed).await?;
    if writes
        .changed
        .iter()
        .any(|changed| changed.run.status == RunStatus::Retrying)
    {
        // A retry may be due sooner than the dispatchers' lead: a dispatcher claims only
        // runs due after those it has claimed until a wake-up or its pace says otherwise.
        crate::wakeups::runs_due(&mut *db).await?;
    }
    insert_attempts(db, &writes.attempts).await?;
    crate::run_logs::record(db, &writes.logs, now).await?;
    release_queued(db, &writes.release, now).await
}

/// Every changed run in one statement; the row's triggers (one in flight, chains) fire per
/// row as for any update.
async fn update_runs(db: &mut PgConnection, changed: &[Changed]) -> Result<()> {
    if changed.is_empty() {
        return Ok(());
    }
    let runs = changed.iter().map(|c| &c.run);
    let keys: Vec<&str> = runs.clone().map(|r| r.idempotency_key.as_str()).collect();
    let run_ats: Vec<DateTime<Utc>> = runs.clone().map(|r| r.run_at).collect();
    let statuses: Vec<&str> = runs.clone().map(|r| r.status.as_str()).collect();
    let attempts: Vec<i32> = runs.clone().map(|r| r.attempt).collect();
    let fire_ats: Vec<DateTime<Utc>> = runs.clone().map(|r| r.fire_at).collect();
    let started: Vec<Option<DateTime<Utc>>> = runs.clone().map(|r| r.started_at).collect();
    let finished: Vec<Option<DateTime<Utc>>> = runs.clone().map(|r| r.finished_at).collect();
    let executors: Vec<Option<&str>> = runs.clone().map(|r| r.executor_id.as_deref()).collect();
    let run_ids: Vec<Option<&str>> = runs.clone().map(|r| r.run_id.as_deref()).collect();
    let published: Vec<Option<DateTime<Utc>>> = runs.clone().map(|r| r.published_at).collect();
    let seqs: Vec<Option<i64>> = runs.clone().map(|r| r.stream_seq).collect();
    let beats: Vec<Option<DateTime<Utc>>> = runs.clone().map(|r| r.heartbeat_at).collect();
    let errors: Vec<Option<&str>> = runs.clone().map(|r| r.last_error.as_deref()).collect();
    let reasons: Vec<Option<&str>> = runs.clone().map(|r| r.reason.as_deref()).collect();
    let dead: Vec<Option<DateTime<Utc>>> = runs.clone().map(|r| r.dead_lettered_at).collect();
    let updated: Vec<DateTime<Utc>> = runs.map(|r| r.updated_at).collect();
    let exclusive: Vec<bool> = changed.iter().map(|c| c.exclusive).collect();
    // The key and run_at find the row in its partition; every other column is the new
    // state the intake decided.
    sqlx::query(
        "update schedule_runs r set status = u.status, attempt = u.attempt, \
           fire_at = u.fire_at, started_at = u.started_at, finished_at = u.finished_at, \
           executor_id = u.executor_id, run_id = u.run_id, published_at = u.published_at, \
           stream_seq = u.stream_seq, heartbeat_at = u.heartbeat_at, \
           last_error = u.last_error, reason = u.reason, \
           dead_lettered_at = u.dead_lettered_at, \
           exclusive = u.exclusive, updated_at = u.updated_at \
         from unnest($1::text[], $2::timestamptz[], $3::text[], $4::int[], \
           $5::timestamptz[], $6::timestamptz[], $7::timestamptz[], $8::text[], $9::text[], \
           $10::timestamptz[], $11::bigint[], $12::timestamptz[], $13::text[], $14::text[], \
           $15::timestamptz[], $16::bool[], $17::timestamptz[]) \
           as u(key, run_at, status, attempt, fire_at, started_at, finished_at, executor_id, \
             run_id, published_at, stream_seq, heartbeat_at, last_error, reason, \
             dead_lettered_at, exclusive, updated_at) \
         where r.idempotency_key = u.key and r.run_at = u.run_at",
    )
    .bind(keys)
    .bind(run_ats)
    .bind(statuses)
    .bind(attempts)
    .bind(fire_ats)
    .bind(started)
    .bind(finished)
    .bind(executors)
    .bind(run_ids)
    .bind(published)
    .bind(seqs)
    .bind(beats)
    .bind(errors)
    .bind(reasons)
    .bind(dead)
    .bind(exclusive)
    .bind(updated)
    .execute(&mut *db)
    .await?;
    Ok(())
}

/// Every ended attempt but a `SUCCESS` in one statement (`on conflict do nothing`: a
/// repeated final report never writes an attempt twice). A `SUCCESS` ends its run for good
/// (no retry follows it), so the run row holds that attempt as it is: writing it again here
/// would be a second row per run on the hottest path.
async fn insert_attempts(db: &mut PgConnection, attempts: &[FinishedAttempt]) -> Result<()> {
    let attempts: Vec<&FinishedAttempt> = attempts
        .iter()
        .filter(|a| a.attempt.status != RunStatus::Success)
        .collect();
    if attempts.is_empty() {
        return Ok(());
    }
    let keys: Vec<&str> = attempts
        .iter()
        .map(|a| a.idempotency_key.as_str())
        .collect();
    let ended = attempts.iter().map(|a| &a.attempt);
    let numbers: Vec<i32> = ended.clone().map(|a| a.attempt).collect();
    let statuses: Vec<&str> = ended.clone().map(|a| a.status.as_str()).collect();
    let errors: Vec<Option<&str>> = ended.clone().map(|a| a.error.as_deref()).collect();
    let executors: Vec<Option<&str>> = ended.clone().map(|a| a.executor_id.as_deref()).collect();
    let run_ids: Vec<Option<&str>> = ended.clone().map(|a| a.run_id.as_deref()).collect();
    let published: Vec<Option<DateTime<Utc>>> = ended.clone().map(|a| a.published_at).collect();
    let started: Vec<Option<DateTime<Utc>>> = ended.clone().map(|a| a.started_at).collect();
    let finished: Vec<DateTime<Utc>> = ended.map(|a| a.finished_at).collect();
    sqlx::query(
        "insert into run_attempts (idempotency_key, attempt, status, error, executor_id, \
           run_id, published_at, started_at, finished_at) \
         select * from unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[], \
           $6::text[], $7::timestamptz[], $8::timestamptz[], $9::timestamptz[]) \
         on conflict do nothing",
    )
    .bind(keys)
    .bind(numbers)
    .bind(statuses)
    .bind(errors)
    .bind(executors)
    .bind(run_ids)
    .bind(published)
    .bind(started)
    .bind(finished)
    .execute(&mut *db)
    .await?;
    Ok(())
}

/// Frees the oldest `QUEUED` run of each schedule in `schedules` for each time it is
/// named there (a run of it in flight ended), and wakes the dispatchers when any was freed.
/// Only `queue` schedules (or ones that were) have `QUEUED` runs, so the statement first
/// asks whether any run at all is `QUEUED` (one probe of the empty partial index per
/// partition), and looks up the batch's schedules only then: under `skip`, every batch
/// names hundreds of schedules whose run ended.
async fn release_queued(
    db: &mut PgConnection,
    schedules: &[String],
    now: DateTime<Utc>,
) -> Result<u64> {
    if schedules.is_empty() {
        return Ok(0);
    }
    // The QUEUED group is written into the text: bound, it would hide the partial index.
    let released: i64 = sqlx::query_scalar(&format!(
        "with ended as ( \
           select id, count(*) as n from unnest($1::text[]) as u(id) group by id \
         ), pick as ( \
           select w.idempotency_key, w.run_at from ( \
             select w.idempotency_key, w.run_at, w.schedule_id, row_number() over ( \
               partition by w.schedule_id order by w.fire_at, w.idempotency_key) as nth \
             from schedule_runs w \
             where w.schedule_id = any($1) and w.status in {QUEUED} \
               and exists (select 1 from schedule_runs x where x.status in {QUEUED})) w \
           join ended on ended.id = w.schedule_id where w.nth <= ended.n \
         ), released as ( \
           update schedule_runs q set status = $4, reason = null, released_at = $2, \
             updated_at = $2 \
           from pick where q.idempotency_key = pick.idempotency_key \
             and q.run_at = pick.run_at and q.status = $3 \
           returning 1 \
         ) select count(*) from released",
        QUEUED = *crate::groups::QUEUED
    ))
    .bind(schedules)
    .bind(now)
    .bind(RunStatus::Queued.as_str())
    .bind(RunStatus::Pending.as_str())
    .fetch_one(&mut *db)
    .await?;
    if released > 0 {
        crate::wakeups::runs_due(&mut *db).await?;
    }
    Ok(u64::try_from(released).unwrap_or(0))
}
