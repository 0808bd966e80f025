//! Executor status reports applied to a run: the forward-only state machine of DESIGN.md §3
//! in one statement (invariant 7), executor ownership, and the release of the next `QUEUED`
//! run when an exclusive run ends.
//!
//! Ranks: `PENDING` 0 < `ENQUEUED` 1 < `STARTED` 2 < `CANCELLING` 3 < final 4. A report
//! applies only when it raises the rank, so a repeated or stale report (`STARTED` after
//! `SUCCESS`) is a no-op. On a `CANCELLING` run a final report applies as sent: `CANCELLED`
//! confirms the cancel, and a `SUCCESS` or `FAILED` the executor reached before it saw the
//! cancel is recorded as the truth (a `FAILED` one is never retried: the caller passes no
//! [`AfterFailure`] for it).
//!
//! An executor only learns a key from a launch message, so a report on a run that was never
//! published is refused ([`Applied::Unpublished`]): `QUEUED`, `SKIPPED`, `CANCELLED` or a
//! failed-before-publish run, and a `PENDING` run whose `fire_at` has not come (no
//! dispatcher can have published it). A due `PENDING` run is accepted: a dispatcher that
//! died between the PubAck and its commit leaves exactly that. Such a run becomes in flight
//! here, so for an exclusive schedule it is refused while another run is in flight
//! ([`Applied::Blocked`]) instead of breaking the one-in-flight index.

use chrono::{DateTime, Utc};
use kairos_core::Reported;
use sqlx::PgConnection;

use crate::runs::Run;
use crate::Result;

/// One status report, as the intake parsed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusReport {
    /// The new status, or a heartbeat.
    pub status: Reported,
    /// The attempt it is about (from the launch message); a report about another attempt
    /// than the one in progress changes nothing. `None`: the attempt in progress.
    pub attempt: Option<u32>,
    /// `false` on a `FAILED` report: do not retry, whatever the policy says.
    pub retryable: Option<bool>,
    /// The executor's run id.
    pub run_id: Option<String>,
    /// The reporting executor; the first one to move the run forward owns it.
    pub executor_id: Option<String>,
    /// Why the run failed.
    pub error: Option<String>,
}

/// What follows a `FAILED` report, decided by the caller from the schedule's retry policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// The next attempt at this time: the run becomes `RETRYING`.
    Retry(DateTime<Utc>),
    /// No attempt follows: the run is `FAILED` and dead-lettered.
    DeadLetter,
}

/// What deciding [`AfterFailure`] needs: the run's attempt in progress and its schedule's
/// failure policy. Locks the run (the transition that follows sees the same attempt).
/// `None` for an unknown run and for a `CANCELLING` one: a cancelled run is never retried.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn failure_context(
    db: &mut PgConnection,
    key: &str,
) -> Result<Option<(i32, crate::schedules::FailurePolicy)>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        attempt: i32,
        #[sqlx(flatten)]
        failure: crate::schedules::FailurePolicy,
    }
    let row: Option<Row> = sqlx::query_as(
        "select r.attempt, coalesce(s.max_attempts, 1) as max_attempts, s.retry_intervals_s, \
           s.retry_backoff_initial_s, s.retry_backoff_multiplier, s.retry_backoff_max_s, \
           s.heartbeat_timeout_s, s.start_timeout_s \
         from schedule_runs r left join schedules s on s.schedule_id = r.schedule_id \
         where r.idempotency_key = $1 and r.status <> 'CANCELLING' for update of r",
    )
    .bind(key)
    .fetch_optional(db)
    .await?;
    Ok(row.map(|row| (row.attempt, row.failure)))
}

/// What a report did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The run moved forward; the run as it is now.
    Moved(Run),
    /// Repeated or stale: nothing changed; the run as it is.
    Unchanged(Run),
    /// Another executor owns the run (and it is not final, or this is a `STARTED`).
    Conflict {
        /// The run as it is.
        run: Run,
        /// Its owner.
        owner: String,
    },
    /// The run was never published, so no executor can be running it.
    Unpublished(Run),
    /// The run was not recorded as published and another run of its exclusive schedule
    /// is in flight: it cannot be in flight too.
    Blocked {
        /// The run as it is.
        run: Run,
        /// The key of the run in flight.
        in_flight: String,
    },
    /// No run has this key.
    NotFound,
}

/// Applies `report` to the run `key`; "now" is the database's clock (`pinned` in tests).
///
/// # Errors
/// [`crate::Error::Database`] when a statement fails.
pub async fn apply(
    db: &mut PgConnection,
    key: &str,
    report: &StatusReport,
    after_failure: Option<AfterFailure>,
    pinned: Option<DateTime<Utc>>,
) -> Result<Applied> {
    let (retry_at, dead_letter) = match after_failure {
        Some(AfterFailure::Retry(at)) => (Some(at), false),
        Some(AfterFailure::DeadLetter) => (None, true),
        None => (None, false),
    };
    let decided: Option<(String, Option<String>)> = sqlx::query_as(TRANSITION)
        .bind(key)
        .bind(report.status.as_str())
        .bind(report.executor_id.as_deref())
        .bind(report.run_id.as_deref())
        .bind(report.error.as_deref())
        .bind(pinned)
        .bind(crate::wakeups::RUNS_CHANNEL)
        .bind(report.attempt.map(|n| i32::try_from(n).unwrap_or(i32::MAX)))
        .bind(retry_at)
        .bind(dead_letter)
        .fetch_optional(&mut *db)
        .await?;
    let Some((action, in_flight)) = decided else {
        return Ok(Applied::NotFound);
    };
    let run = crate::runs::get(&mut *db, key)
        .await?
        .expect("the transition locked this row in this transaction");
    Ok(match (action.as_str(), in_flight) {
        ("apply" | "heartbeat", _) => Applied::Moved(run),
        ("conflict", _) => Applied::Conflict {
            owner: run.executor_id.clone().unwrap_or_default(),
            run,
        },
        ("unpublished", _) => Applied::Unpublished(run),
        ("blocked", Some(in_flight)) => Applied::Blocked { run, in_flight },
        _ => Applied::Unchanged(run),
    })
}

/// The transition. `cur` locks the row (concurrent reports on one run queue up and each
/// sees the latest status; found by key alone, one index probe per partition);
/// `blocker` is another exclusive run holding the schedule (`runs_in_flight`, the table
/// the one-in-flight triggers keep);
/// `decision` ranks; `upd` moves it (to `RETRYING` with the next attempt when `$9` gives its
/// time; dead-lettered when `$10`); `beat` records a heartbeat; `recorded` keeps a finished
/// attempt; `released` frees the oldest `QUEUED` run of the schedule when an exclusive run
/// reached a final status, and `woken` tells dispatchers.
///
/// Parameters: $1 key, $2 reported, $3 executor_id, $4 run_id, $5 error, $6 pinned now,
/// $7 wake-up channel, $8 the report's attempt, $9 next attempt at, $10 dead-letter.
const TRANSITION: &str = "
with cur as (
    select idempotency_key, run_at, schedule_id, status, executor_id, run_id, published_at,
        fire_at, started_at, attempt,
        source <> 'api' and coalesce((select s.overlap_policy <> 'allow'
            from schedules s where s.schedule_id = r.schedule_id), false) as exclusive_now
    from schedule_runs r
    where idempotency_key = $1 for update
), blocker as (
    select min(b.idempotency_key) as key from runs_in_flight b join cur
      on b.schedule_id = cur.schedule_id and b.idempotency_key <> cur.idempotency_key
), decision as (
    select cur.idempotency_key, cur.run_at,
        case
            when $8::int is not null and $8 <> cur.attempt then 'stale'
            when cur.status = 'PENDING'
                 and cur.fire_at > coalesce($6, clock_timestamp())
                then 'unpublished'
            when cur.status <> 'PENDING' and cur.published_at is null
                then 'unpublished'
            when $3::text is not null and cur.executor_id is not null
                 and cur.executor_id <> $3
                 and ($2 in ('STARTED', 'HEARTBEAT')
                      or cur.status in ('PENDING', 'ENQUEUED', 'STARTED', 'CANCELLING'))
                then 'conflict'
            when cur.status = 'PENDING' and cur.exclusive_now
                 and (select key from blocker) is not null
                then 'blocked'
            when $2 = 'HEARTBEAT'
                then case when cur.status in ('ENQUEUED', 'STARTED', 'CANCELLING')
                          then 'heartbeat'
                          else 'noop' end
            when (case cur.status when 'PENDING' then 0 when 'ENQUEUED' then 1
                                  when 'STARTED' then 2 when 'CANCELLING' then 3 else 4 end)
                 < (case $2 when 'STARTED' then 2 else 4 end)
                then 'apply'
            else 'noop'
        end as action
    from cur
), upd as (
    update schedule_runs r set
        status = case when $2 = 'FAILED' and $9::timestamptz is not null then 'RETRYING'
                      else $2 end,
        attempt = case when $2 = 'FAILED' and $9::timestamptz is not null
                       then r.attempt + 1 else r.attempt end,
        fire_at = coalesce(case when $2 = 'FAILED' then $9::timestamptz end, r.fire_at),
        started_at = case when $2 = 'FAILED' and $9::timestamptz is not null then null
                          when $2 = 'STARTED' then coalesce($6, clock_timestamp())
                          else r.started_at end,
        finished_at = case when $2 = 'FAILED' and $9::timestamptz is not null then null
                           when $2 <> 'STARTED' then coalesce($6, clock_timestamp())
                           else r.finished_at end,
        executor_id = case when $2 = 'FAILED' and $9::timestamptz is not null then null
                           else coalesce(r.executor_id, $3) end,
        run_id = case when $2 = 'FAILED' and $9::timestamptz is not null then null
                      else coalesce($4, r.run_id) end,
        -- A due PENDING run reported on was published (see `exclusive` below): record it
        -- now, or its next report would be refused as one about an unpublished run.
        published_at = case when $2 = 'FAILED' and $9::timestamptz is not null then null
                            when r.status = 'PENDING'
                            then coalesce(r.published_at, $6, clock_timestamp())
                            else r.published_at end,
        stream_seq = case when $2 = 'FAILED' and $9::timestamptz is not null then null
                          else r.stream_seq end,
        heartbeat_at = case when $2 = 'FAILED' and $9::timestamptz is not null then null
                            else r.heartbeat_at end,
        last_error = case when $2 = 'FAILED' then coalesce($5, r.last_error)
                          else r.last_error end,
        reason = case when r.status = 'CANCELLING' and $2 in ('SUCCESS', 'FAILED')
                      then format('executor reported %s before it stopped the run (%s)', $2,
                          coalesce(r.reason, 'cancel requested'))
                      when $2 = 'FAILED' and $9::timestamptz is not null
                      then format('attempt %s failed; attempt %s at %s', r.attempt,
                          r.attempt + 1, to_char($9::timestamptz at time zone 'UTC',
                          'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'))
                      when $2 = 'FAILED' then 'executor reported FAILED'
                      when $2 = 'CANCELLED' and r.status <> 'CANCELLING'
                      then 'cancelled by the executor'
                      else r.reason end,
        dead_lettered_at = case when $2 = 'FAILED' and $10
                                then coalesce($6, clock_timestamp())
                                else r.dead_lettered_at end,
        -- A PENDING run reported on was published by a dispatcher that died before
        -- recording it: it is in flight now, exclusive if its schedule says so.
        exclusive = case when r.status = 'PENDING' then cur.exclusive_now
            else r.exclusive end,
        updated_at = coalesce($6, clock_timestamp())
    from decision d, cur
    where r.idempotency_key = d.idempotency_key and r.run_at = d.run_at and d.action = 'apply'
    returning r.schedule_id, r.status, r.exclusive
), beat as (
    update schedule_runs r set heartbeat_at = coalesce($6, clock_timestamp()),
        executor_id = coalesce(r.executor_id, $3),
        updated_at = coalesce($6, clock_timestamp())
    from decision d
    where r.idempotency_key = d.idempotency_key and r.run_at = d.run_at
      and d.action = 'heartbeat'
), recorded as (
    insert into run_attempts (idempotency_key, attempt, status, error, executor_id, run_id,
        published_at, started_at, finished_at)
    select cur.idempotency_key, cur.attempt, $2, case when $2 = 'FAILED' then $5 end,
        coalesce(cur.executor_id, $3), coalesce($4, cur.run_id), cur.published_at,
        cur.started_at, coalesce($6, clock_timestamp())
    from cur join decision d on d.action = 'apply'
    where $2 in ('SUCCESS', 'FAILED')
    on conflict do nothing
), released as (
    update schedule_runs q set status = 'PENDING', reason = null,
        released_at = coalesce($6, clock_timestamp()),
        updated_at = coalesce($6, clock_timestamp())
    where (q.idempotency_key, q.run_at) = (
        select w.idempotency_key, w.run_at from schedule_runs w
        join upd on w.schedule_id = upd.schedule_id
        where upd.exclusive and upd.status in ('SUCCESS', 'FAILED', 'CANCELLED')
          and w.status = 'QUEUED'
        order by w.fire_at, w.idempotency_key limit 1)
    returning q.idempotency_key
), woken as (
    select pg_notify($7, '') from released
)
select action, (select key from blocker) as in_flight
from decision left join (select count(*) as n from woken) as w on true";
