//! Executor status reports applied to a run: the forward-only state machine of DESIGN.md §3
//! in one statement (invariant 7), executor ownership, and the release of the next `QUEUED`
//! run when an exclusive run ends.
//!
//! Ranks: `PENDING` 0 < `ENQUEUED` 1 < `STARTED` 2 < final 3. A report applies only when it
//! raises the rank, so a repeated or stale report (`STARTED` after `SUCCESS`) is a no-op.
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
    /// The new status.
    pub status: Reported,
    /// The executor's run id.
    pub run_id: Option<String>,
    /// The reporting executor; the first one to move the run forward owns it.
    pub executor_id: Option<String>,
    /// Why the run failed.
    pub error: Option<String>,
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
    pinned: Option<DateTime<Utc>>,
) -> Result<Applied> {
    let decided: Option<(String, Option<String>)> = sqlx::query_as(TRANSITION)
        .bind(key)
        .bind(report.status.as_str())
        .bind(report.executor_id.as_deref())
        .bind(report.run_id.as_deref())
        .bind(report.error.as_deref())
        .bind(pinned)
        .bind(crate::wakeups::RUNS_CHANNEL)
        .fetch_optional(&mut *db)
        .await?;
    let Some((action, in_flight)) = decided else {
        return Ok(Applied::NotFound);
    };
    let run = crate::runs::get(&mut *db, key)
        .await?
        .expect("the transition locked this row in this transaction");
    Ok(match (action.as_str(), in_flight) {
        ("apply", _) => Applied::Moved(run),
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
/// sees the latest status); `blocker` is another exclusive in-flight run of the schedule;
/// `decision` ranks; `upd` moves it; `released` frees the oldest `QUEUED` run of the
/// schedule when an exclusive run reached a final status, and `woken` tells dispatchers.
const TRANSITION: &str = "
with cur as (
    select idempotency_key, schedule_id, status, executor_id, published_at, fire_at,
        source <> 'api' and coalesce((select s.overlap_policy in ('skip', 'queue')
            from schedules s where s.schedule_id = r.schedule_id), false) as exclusive_now
    from schedule_runs r
    where idempotency_key = $1 for update
), blocker as (
    select min(b.idempotency_key) as key from schedule_runs b join cur
      on b.schedule_id = cur.schedule_id and b.idempotency_key <> cur.idempotency_key
    where b.exclusive and b.status in ('ENQUEUED', 'STARTED')
), decision as (
    select cur.idempotency_key,
        case
            when cur.status = 'PENDING'
                 and cur.fire_at > coalesce($6, clock_timestamp())
                then 'unpublished'
            when cur.status <> 'PENDING' and cur.published_at is null
                then 'unpublished'
            when $3::text is not null and cur.executor_id is not null
                 and cur.executor_id <> $3
                 and ($2 = 'STARTED' or cur.status in ('PENDING', 'ENQUEUED', 'STARTED'))
                then 'conflict'
            when cur.status = 'PENDING' and cur.exclusive_now
                 and (select key from blocker) is not null
                then 'blocked'
            when (case cur.status when 'PENDING' then 0 when 'ENQUEUED' then 1
                                  when 'STARTED' then 2 else 3 end)
                 < (case $2 when 'STARTED' then 2 else 3 end)
                then 'apply'
            else 'noop'
        end as action
    from cur
), upd as (
    update schedule_runs r set
        status = $2,
        started_at = case when $2 = 'STARTED' then coalesce($6, clock_timestamp())
                          else r.started_at end,
        finished_at = case when $2 <> 'STARTED' then coalesce($6, clock_timestamp())
                           else r.finished_at end,
        executor_id = coalesce(r.executor_id, $3),
        run_id = coalesce($4, r.run_id),
        last_error = case when $2 = 'FAILED' then coalesce($5, r.last_error)
                          else r.last_error end,
        reason = case when $2 = 'FAILED' then 'executor reported FAILED' else r.reason end,
        -- A PENDING run reported on was published by a dispatcher that died before
        -- recording it: it is in flight now, exclusive if its schedule says so.
        exclusive = case when r.status = 'PENDING' then cur.exclusive_now
            else r.exclusive end,
        updated_at = coalesce($6, clock_timestamp())
    from decision d, cur
    where r.idempotency_key = d.idempotency_key and d.action = 'apply'
    returning r.schedule_id, r.status, r.exclusive
), released as (
    update schedule_runs q set status = 'PENDING', reason = null,
        released_at = coalesce($6, clock_timestamp()),
        updated_at = coalesce($6, clock_timestamp())
    where q.idempotency_key = (
        select w.idempotency_key from schedule_runs w join upd on w.schedule_id = upd.schedule_id
        where upd.exclusive and upd.status in ('SUCCESS', 'FAILED') and w.status = 'QUEUED'
        order by w.fire_at, w.idempotency_key limit 1)
    returning q.idempotency_key
), woken as (
    select pg_notify($7, '') from released
)
select action, (select key from blocker) as in_flight
from decision left join (select count(*) as n from woken) as w on true";
