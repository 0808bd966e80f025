//! The dispatcher's statements on `schedule_runs`: claim due `PENDING` runs (row locks held
//! by the caller's transaction, invariant "claims die with their holder"), serialize
//! exclusive schedules, look up what blocks them, load their DAGs, and record every outcome
//! of a batch in one statement. Plus the sweep (`max_run_seconds` → `TIMED_OUT`, stranded
//! `QUEUED` runs released) and the run launcher's insert.
//!
//! Every function that is part of a claim takes `&mut PgConnection`: the caller opens one
//! transaction, claims, publishes and records, then commits. A killed caller rolls it all
//! back and the runs are `PENDING` again.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use kairos_core::{FailurePolicy, RunStatus};
use sqlx::{PgConnection, PgExecutor};

use crate::groups::{AWAITING_LAUNCH, HOLDING};
pub use crate::outcome::{Outcome, Settled, Unlaunchable};
use crate::Result;
pub use claim::{bound_idle, claim, claim_key, ClaimScope, Claimed};
pub use exclusive::{blockers, lock_ahead, lock_schedules, Blockers};

mod claim;
mod exclusive;
pub mod waves;

/// The advisory-lock namespace of exclusive schedules (first key of the two-key form), so
/// these locks never collide with another user of advisory locks on the same database.
pub const EXCLUSIVE_LOCK_SPACE: i32 = 0x6b61_6972; // "kair"

/// The schedule id of runs started through `POST /run-launcher/start` (they belong to no
/// schedule; the launch schema requires an id here).
pub const API_SCHEDULE_ID: &str = "run-launcher";

/// What a round's claim had seen of the schedule writes: the snapshot its transaction took
/// before claiming. A write not visible in it may have skipped the claimed runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteSnapshot(String);

/// The snapshot to take, in the claim's transaction, just before claiming.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn write_snapshot(tx: &mut PgConnection) -> Result<WriteSnapshot> {
    let snapshot: String = sqlx::query_scalar("select pg_current_snapshot()::text")
        .fetch_one(&mut *tx)
        .await?;
    Ok(WriteSnapshot(snapshot))
}

/// The schedules written (updated, inserted or deleted) by transactions that have committed
/// since `seen` was taken: one scan of `schedule_writes`, which holds a row per write
/// statement of the last ten minutes.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn written_since(
    db: impl PgExecutor<'_>,
    seen: &WriteSnapshot,
) -> Result<HashSet<String>> {
    let ids: Vec<String> = sqlx::query_scalar(
        "select distinct unnest(schedule_ids) from schedule_writes \
         where not pg_visible_in_snapshot(xid, $1::pg_snapshot)",
    )
    .bind(&seen.0)
    .fetch_all(db)
    .await?;
    Ok(ids.into_iter().collect())
}

/// Locks again, in a later transaction of the same round, the claimed `runs` still waiting
/// for their wave: those still in the status and attempt they were claimed in, skipping any
/// another transaction holds. Returns each one's `fire_at` and `revision` as stored now.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn relock(
    tx: &mut PgConnection,
    runs: &[Claimed],
) -> Result<HashMap<String, (DateTime<Utc>, Option<i64>)>> {
    let keys: Vec<&str> = runs.iter().map(|r| r.idempotency_key.as_str()).collect();
    let run_ats: Vec<DateTime<Utc>> = runs.iter().map(|r| r.run_at).collect();
    let statuses: Vec<&str> = runs.iter().map(|r| r.status.as_str()).collect();
    let attempts: Vec<i32> = runs.iter().map(|r| r.attempt).collect();
    let rows: Vec<(String, DateTime<Utc>, Option<i64>)> = sqlx::query_as(
        "select r.idempotency_key, r.fire_at, r.revision from schedule_runs r \
         join unnest($1::text[], $2::timestamptz[], $3::text[], $4::int4[]) \
           as v(key, run_at, status, attempt) \
           on r.idempotency_key = v.key and r.run_at = v.run_at \
         where r.status = v.status and r.attempt = v.attempt \
         for update of r skip locked",
    )
    .bind(keys)
    .bind(run_ats)
    .bind(statuses)
    .bind(attempts)
    .fetch_all(&mut *tx)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(key, fire_at, revision)| (key, (fire_at, revision)))
        .collect())
}

/// The current revision of each of `schedule_ids` that exists.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn schedule_revisions(
    db: impl PgExecutor<'_>,
    schedule_ids: &[String],
) -> Result<HashMap<String, i64>> {
    let rows: Vec<(String, i64)> =
        sqlx::query_as("select schedule_id, revision from schedules where schedule_id = any($1)")
            .bind(schedule_ids)
            .fetch_all(db)
            .await?;
    Ok(rows.into_iter().collect())
}

/// The DAGs of the given `(workflow_id, version)` pairs; missing ones are absent.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn dags(
    db: impl PgExecutor<'_>,
    versions: &[(String, i32)],
) -> Result<HashMap<(String, i32), serde_json::Value>> {
    let (ids, numbers): (Vec<String>, Vec<i32>) = versions.iter().cloned().unzip();
    let rows: Vec<(String, i32, serde_json::Value)> = sqlx::query_as(
        "select w.workflow_id, w.version, w.dag from workflows w \
         join unnest($1::text[], $2::int4[]) as v(workflow_id, version) \
           on w.workflow_id = v.workflow_id and w.version = v.version",
    )
    .bind(ids)
    .bind(numbers)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, version, dag)| ((id, version), dag))
        .collect())
}

/// The `run_at` span of the runs a [`record`] covers. `schedule_runs` is partitioned by day
/// of `run_at`: with the span, PostgreSQL reads only the partitions the batch lies in,
/// pruned once per statement, instead of probing every partition's key index for every run
/// (`scripts/partition-hot-path` compares the two).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSpan {
    first: DateTime<Utc>,
    last: DateTime<Utc>,
}

impl RunSpan {
    /// The runs whose `run_at` is in `[first, last]`.
    pub fn between(first: DateTime<Utc>, last: DateTime<Utc>) -> RunSpan {
        RunSpan { first, last }
    }

    /// The span of `runs`; `None` when there are none (and so nothing to record).
    pub fn of(runs: &[Claimed]) -> Option<RunSpan> {
        let first = runs.iter().map(|run| run.run_at).min()?;
        let last = runs.iter().map(|run| run.run_at).max()?;
        Some(RunSpan { first, last })
    }
}

/// Records every outcome of a batch in one statement; `span` covers the runs the outcomes
/// are for ([`RunSpan::of`] the claimed runs they came from). A run moved to `ENQUEUED` gets its
/// outcome's `published_at`, the database's time when its own acknowledgement came in (the
/// dispatcher's estimate of it, never ahead of the database's clock), or the statement's
/// clock when that is not known.
///
/// Returns the fire drift of every planner tick (`source = 'schedule'`, first attempt) this
/// call moved to `ENQUEUED`: seconds from its planned `run_at` to `published_at` (negative when a negative
/// jitter let it out early). Manual, backfill and api runs have no planned time to drift
/// from.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails, including a second exclusive run
/// in flight for one schedule (which the row lock in `schedule_dispatch_locks` prevents).
pub async fn record(
    tx: &mut PgConnection,
    outcomes: &[Outcome],
    span: RunSpan,
    now: DateTime<Utc>,
) -> Result<Vec<f64>> {
    if outcomes.is_empty() {
        return Ok(Vec::new());
    }
    let keys: Vec<&str> = outcomes.iter().map(Outcome::key).collect();
    // NULL keeps the status (a retryable launch error: PENDING or RETRYING stays so).
    let statuses: Vec<Option<&str>> = outcomes
        .iter()
        .map(|o| o.new_status().map(RunStatus::as_str))
        .collect();
    let seqs: Vec<Option<i64>> = outcomes.iter().map(Outcome::stream_seq).collect();
    let reasons: Vec<Option<String>> = outcomes.iter().map(Outcome::reason).collect();
    let errors: Vec<Option<String>> = outcomes.iter().map(Outcome::launch_error).collect();
    let pins: Vec<Option<&str>> = outcomes.iter().map(Outcome::pin).collect();
    let exclusive: Vec<bool> = outcomes.iter().map(Outcome::exclusive).collect();
    let attempted: Vec<bool> = outcomes.iter().map(Outcome::attempted).collect();
    let published: Vec<Option<DateTime<Utc>>> =
        outcomes.iter().map(Outcome::published_at).collect();
    // The drift comes back with the update (no second statement on the hot path).
    let drift = sqlx::query_scalar(&format!(
        "with moved as (update schedule_runs r set status = coalesce(v.status, r.status), \
           stream_seq = coalesce(v.stream_seq, r.stream_seq), \
           published_at = case when v.status = 'ENQUEUED' \
             then coalesce(v.published_at, clock_timestamp()) else r.published_at end, \
           attempts = r.attempts + case when v.attempted then 1 else 0 end, \
           reason = coalesce(v.reason, r.reason), \
           last_error = coalesce(v.last_error, r.last_error), \
           exclusive = v.exclusive, launch_region = coalesce(v.pin, r.launch_region), \
           finished_at = case when v.status in ('FAILED', 'SKIPPED') then $8 \
             else r.finished_at end, \
           updated_at = $8 \
         from unnest($1::text[], $2::text[], $3::int8[], $4::text[], $5::text[], \
                     $6::bool[], $7::bool[], $9::timestamptz[], $12::text[]) \
           as v(idempotency_key, status, stream_seq, reason, last_error, exclusive, attempted, \
                published_at, pin) \
         where r.idempotency_key = v.idempotency_key and r.status in {AWAITING_LAUNCH} \
           and r.run_at between $10 and $11 \
         returning r.status, r.source, r.run_at, r.published_at, r.attempt) \
         select extract(epoch from published_at - run_at)::float8 from moved \
         where status = 'ENQUEUED' and source = 'schedule' and attempt = 1",
        AWAITING_LAUNCH = *AWAITING_LAUNCH
    ))
    .bind(keys)
    .bind(statuses)
    .bind(seqs)
    .bind(reasons)
    .bind(errors)
    .bind(exclusive)
    .bind(attempted)
    .bind(now)
    .bind(published)
    .bind(span.first)
    .bind(span.last)
    .bind(pins)
    .fetch_all(&mut *tx)
    .await?;
    Ok(drift)
}

/// How long until the earliest `PENDING` or `RETRYING` run (whose `fire_at` is after `after`,
/// when given) is due (zero when one is due now), by the database's clock; `None` when
/// nothing is pending.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn next_due_in(
    db: impl PgExecutor<'_>,
    pinned: Option<DateTime<Utc>>,
    after: Option<DateTime<Utc>>,
) -> Result<Option<std::time::Duration>> {
    // Served by the partial index schedule_runs_due (fire_at only): one index probe, from
    // `after` when given. `greatest` skips a NULL, so with no run it would say 0 (due now):
    // the `case` keeps "none" apart, or an idle dispatcher would claim every few ms.
    let seconds: Option<f64> = sqlx::query_scalar(&format!(
        "select case when min(fire_at) is not null then greatest(extract(epoch from \
           min(fire_at) - coalesce($1::timestamptz, clock_timestamp())), 0)::float8 end \
         from schedule_runs where status in {AWAITING_LAUNCH} \
           and fire_at > coalesce($2::timestamptz, '-infinity')",
        AWAITING_LAUNCH = *AWAITING_LAUNCH
    ))
    .bind(pinned)
    .bind(after)
    .fetch_one(db)
    .await?;
    Ok(seconds.map(std::time::Duration::from_secs_f64))
}

/// A run the sweep timed out, with what deciding its next attempt needs.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedOut {
    /// The run.
    pub idempotency_key: String,
    /// The attempt that timed out.
    pub attempt: i32,
    /// `heartbeat` (silent past `heartbeat_timeout_s`) or `max_run_seconds`.
    pub cause: String,
    /// Its schedule's failure policy (absent for a run whose schedule is gone).
    pub failure: FailurePolicy,
}

/// The row [`time_out`] reads into a [`TimedOut`].
#[derive(sqlx::FromRow)]
struct TimedOutRow {
    idempotency_key: String,
    attempt: i32,
    cause: String,
    #[sqlx(flatten)]
    failure: crate::rows::FailureRow,
}

impl From<TimedOutRow> for TimedOut {
    fn from(row: TimedOutRow) -> TimedOut {
        TimedOut {
            idempotency_key: row.idempotency_key,
            attempt: row.attempt,
            cause: row.cause,
            failure: row.failure.into(),
        }
    }
}

/// In-flight runs older than their schedule's `max_run_seconds`, and `STARTED` runs with no
/// report for `heartbeat_timeout_s`, become `TIMED_OUT` (and the attempt is recorded). Only
/// runs of schedules that set one of these limits are visited (index `schedules_run_limits`).
/// Returns them; the caller decides, in the same transaction, whether each is retried
/// ([`crate::attempts::retry`]) or dead-lettered.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn time_out(tx: &mut PgConnection, now: DateTime<Utc>) -> Result<Vec<TimedOut>> {
    // The lateral join makes the schedules with limits the outer side of the loop whatever
    // the statistics say: with a plain join and statistics taken before a burst, the planner
    // started from every run in flight (100,000 after one burst), on every instance, every
    // second. The conditions sit inside the lateral query so only late runs are locked.
    let rows: Vec<TimedOutRow> = sqlx::query_as(
        "with late as ( \
           select r.idempotency_key, \
             case when s.max_run_seconds is not null \
                   and coalesce(r.started_at, r.published_at) \
                       < $1 - make_interval(secs => s.max_run_seconds) \
                  then 'max_run_seconds' else 'heartbeat' end as cause \
           from (select schedule_id, max_run_seconds, heartbeat_timeout_s from schedules \
                 where max_run_seconds is not null or heartbeat_timeout_s is not null) s \
           cross join lateral ( \
             select r.idempotency_key, r.started_at, r.published_at from schedule_runs r \
             where r.schedule_id = s.schedule_id and r.status in ('ENQUEUED', 'STARTED') and ( \
               (s.max_run_seconds is not null and coalesce(r.started_at, r.published_at) \
                  < $1 - make_interval(secs => s.max_run_seconds)) \
               or (s.heartbeat_timeout_s is not null and r.status = 'STARTED' \
                  and greatest(r.started_at, r.heartbeat_at) \
                    < $1 - make_interval(secs => s.heartbeat_timeout_s)))) r \
           for update of r skip locked \
         ), moved as ( \
           update schedule_runs r set status = 'TIMED_OUT', finished_at = $1, updated_at = $1, \
             reason = case l.cause when 'heartbeat' \
               then format('no heartbeat or status report for %s s (heartbeat_timeout_s)', \
                 s.heartbeat_timeout_s) \
               else format('ran longer than max_run_seconds (%s s)', s.max_run_seconds) end \
           from late l, schedules s \
           where r.idempotency_key = l.idempotency_key and s.schedule_id = r.schedule_id \
           returning r.*, l.cause \
         ), recorded as ( \
           insert into run_attempts (idempotency_key, attempt, status, error, executor_id, \
             run_id, published_at, started_at, finished_at) \
           select idempotency_key, attempt, 'TIMED_OUT', reason, executor_id, run_id, \
             published_at, started_at, finished_at from moved \
           on conflict do nothing \
         ) \
         select m.idempotency_key, m.attempt, m.cause, s.max_attempts, s.retry_intervals_s, \
           s.retry_backoff_initial_s, s.retry_backoff_multiplier, s.retry_backoff_max_s, \
           s.heartbeat_timeout_s, s.start_timeout_s \
         from moved m join schedules s on s.schedule_id = m.schedule_id",
    )
    .bind(now)
    .fetch_all(&mut *tx)
    .await?;
    Ok(rows.into_iter().map(TimedOut::from).collect())
}

/// For every schedule with `QUEUED` runs, fewer runs in flight than its limit
/// (`max_in_flight`, else one) and nothing due, the oldest `QUEUED` run becomes `PENDING`
/// (after a timeout, or when a status callback's release raced with the dispatcher queueing
/// a run). Returns their keys.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn release_queued(db: impl PgExecutor<'_>, now: DateTime<Utc>) -> Result<Vec<String>> {
    Ok(sqlx::query_scalar(&format!(
        "update schedule_runs q set status = 'PENDING', reason = null, updated_at = $1, \
           released_at = $1 \
         where q.status = 'QUEUED' and q.idempotency_key in ( \
           select distinct on (w.schedule_id) w.idempotency_key from schedule_runs w \
           where w.status = 'QUEUED' \
             and not exists (select 1 from schedule_runs b where b.schedule_id = w.schedule_id \
                             and b.status = 'PENDING' and b.fire_at <= $1) \
             and (select count(*) from schedule_runs b where b.schedule_id = w.schedule_id \
                    and b.status in {HOLDING}) \
                 < coalesce((select s.max_in_flight from schedules s \
                             where s.schedule_id = w.schedule_id), 1) \
           order by w.schedule_id, w.fire_at, w.idempotency_key) \
         returning q.idempotency_key",
        HOLDING = *HOLDING
    ))
    .bind(now)
    .fetch_all(db)
    .await?)
}

/// A run to start through `POST /run-launcher/start`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiRun {
    /// The caller's key (`^[A-Za-z0-9_-]{1,200}$`, not 64 lowercase hex digits).
    pub idempotency_key: String,
    /// The workflow.
    pub workflow_id: String,
    /// Its version.
    pub version: i32,
    /// The user to launch as.
    pub user_id: String,
    /// The logical time of the run (whole seconds).
    pub scheduled_for: DateTime<Utc>,
}

/// Writes an api run, due now, unless its key exists. Returns whether it was written.
/// The key is claimed in the ledger `run_keys` in the same statement (a trigger), so the key
/// stays unique whatever `scheduled_for` a repeated request carries.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails (a key the CHECK refuses included).
pub async fn insert_api_run(
    db: impl PgExecutor<'_>,
    run: &ApiRun,
    now: DateTime<Utc>,
) -> Result<bool> {
    let done = sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
         source, workflow_id, version, user_id, created_at, updated_at) \
         values ($1, $2, $3, $4, 'PENDING', 'api', $5, $6, $7, $4, $4) \
         on conflict do nothing",
    )
    .bind(&run.idempotency_key)
    .bind(API_SCHEDULE_ID)
    .bind(run.scheduled_for)
    .bind(now)
    .bind(&run.workflow_id)
    .bind(run.version)
    .bind(&run.user_id)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}
