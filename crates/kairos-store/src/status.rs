//! Executor status callbacks (`STARTED`, `SUCCESS`, `FAILED`) applied to a run: the
//! forward-only state machine of DESIGN.md §3 in one statement (invariant 7), executor
//! ownership, and the release of the next `QUEUED` run when an exclusive run ends.
//!
//! Ranks: `PENDING` 0 < `ENQUEUED` 1 < `STARTED` 2 < final 3. A report applies only when it
//! raises the rank, so a repeated or stale report (`STARTED` after `SUCCESS`) is a no-op.
//! `PENDING` accepts reports because an executor only learns a key from a launch message:
//! a `PENDING` run it reports on was published by a dispatcher that died before recording
//! it. `QUEUED`, `SKIPPED` and `CANCELLED` runs were never published; reports on them are
//! no-ops.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use crate::runs::Run;
use crate::Result;

/// What an executor reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reported {
    /// The run began.
    Started,
    /// The run ended well.
    Success,
    /// The run ended badly.
    Failed,
}

impl Reported {
    /// The status as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Reported::Started => "STARTED",
            Reported::Success => "SUCCESS",
            Reported::Failed => "FAILED",
        }
    }

    /// Parses `STARTED`, `SUCCESS` or `FAILED`.
    pub fn parse(text: &str) -> Option<Reported> {
        match text {
            "STARTED" => Some(Reported::Started),
            "SUCCESS" => Some(Reported::Success),
            "FAILED" => Some(Reported::Failed),
            _ => None,
        }
    }
}

/// One status callback.
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
    /// No run has this key.
    NotFound,
}

/// Applies `report` to the run `key`.
///
/// # Errors
/// [`crate::Error::Database`] when a statement fails.
pub async fn apply(
    db: &mut PgConnection,
    key: &str,
    report: &StatusReport,
    pinned: Option<DateTime<Utc>>,
) -> Result<Applied> {
    let action: Option<String> = sqlx::query_scalar(TRANSITION)
        .bind(key)
        .bind(report.status.as_str())
        .bind(report.executor_id.as_deref())
        .bind(report.run_id.as_deref())
        .bind(report.error.as_deref())
        .bind(pinned)
        .fetch_optional(&mut *db)
        .await?;
    let Some(action) = action else {
        return Ok(Applied::NotFound);
    };
    let run: Run = sqlx::query_as(&format!(
        "select {RUN_COLUMNS} from schedule_runs where idempotency_key = $1"
    ))
    .bind(key)
    .fetch_one(&mut *db)
    .await?;
    Ok(match action.as_str() {
        "apply" => Applied::Moved(run),
        "conflict" => Applied::Conflict {
            owner: run.executor_id.clone().unwrap_or_default(),
            run,
        },
        _ => Applied::Unchanged(run),
    })
}

/// The columns of [`Run`].
const RUN_COLUMNS: &str = "idempotency_key, schedule_id, run_at, fire_at, status, source, \
    workflow_id, version, user_id, run_id, attempts, reason, last_error, published_at, \
    stream_seq, started_at, finished_at, executor_id, created_at, updated_at";

/// Reads one run by key.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn get(db: &mut PgConnection, key: &str) -> Result<Option<Run>> {
    Ok(sqlx::query_as(&format!(
        "select {RUN_COLUMNS} from schedule_runs where idempotency_key = $1"
    ))
    .bind(key)
    .fetch_optional(db)
    .await?)
}

/// The transition. `cur` locks the row (concurrent reports on one run queue up and each
/// sees the latest status); `decision` ranks; `upd` moves it; `released` frees the oldest
/// `QUEUED` run of the schedule when an exclusive run reached a final status.
const TRANSITION: &str = "
with cur as (
    select idempotency_key, status, executor_id from schedule_runs
    where idempotency_key = $1 for update
), decision as (
    select cur.idempotency_key,
        case
            when $3::text is not null and cur.executor_id is not null
                 and cur.executor_id <> $3
                 and ($2 = 'STARTED' or cur.status in ('PENDING', 'ENQUEUED', 'STARTED'))
                then 'conflict'
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
        exclusive = case when r.status = 'PENDING' then r.source <> 'api' and coalesce(
                (select s.overlap_policy in ('skip', 'queue') from schedules s
                 where s.schedule_id = r.schedule_id), false)
            else r.exclusive end,
        updated_at = coalesce($6, clock_timestamp())
    from decision d
    where r.idempotency_key = d.idempotency_key and d.action = 'apply'
    returning r.schedule_id, r.status, r.exclusive
), released as (
    update schedule_runs q set status = 'PENDING', reason = null,
        updated_at = coalesce($6, clock_timestamp())
    where q.idempotency_key = (
        select w.idempotency_key from schedule_runs w join upd on w.schedule_id = upd.schedule_id
        where upd.exclusive and upd.status in ('SUCCESS', 'FAILED') and w.status = 'QUEUED'
        order by w.fire_at, w.idempotency_key limit 1)
    returning q.idempotency_key
)
select action from decision";
