//! Statements on `schedule_runs` that the registrar and the read API need: history reads,
//! the insert every writer of a run row uses (`on conflict do nothing`: invariant "one row
//! per tick"), and the reconciliation of a schedule's unpublished runs when it is paused,
//! resumed, rescheduled or deleted. The planner's and dispatcher's claims live beside these
//! ([`crate::planning`], [`crate::dispatch`]).

use chrono::{DateTime, Utc};
use kairos_core::{OverlapPolicy, Run, RunSource, RunStatus};
use sqlx::PgExecutor;

use crate::groups::{PLANNED, REVIVABLE, UNPUBLISHED};
use crate::rows::RunRow;
use crate::Result;

/// The columns of a whole run (`kairos_core::Run`), in order: the one list every read of
/// a whole run uses.
pub(crate) const RUN_COLUMNS: &str =
    "idempotency_key, schedule_id, run_at, fire_at, status, source, \
    workflow_id, version, user_id, run_id, attempts, attempt, heartbeat_at, dead_lettered_at, \
    reason, last_error, published_at, stream_seq, started_at, finished_at, executor_id, \
    parent_key, created_at, updated_at, schedule_revision, deadline_at, late_at, late_reason, launch_region";

/// [`RUN_COLUMNS`], each qualified by the table alias `alias` (`r.idempotency_key, …`), for
/// a read of whole runs joined to other tables.
pub(crate) fn run_columns_of(alias: &str) -> String {
    RUN_COLUMNS
        .split(", ")
        .map(|column| format!("{alias}.{column}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A run row to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRun {
    /// `RunKey` as hex.
    pub idempotency_key: String,
    /// Its schedule.
    pub schedule_id: String,
    /// The planned tick (whole seconds).
    pub run_at: DateTime<Utc>,
    /// The tick plus jitter.
    pub fire_at: DateTime<Utc>,
    /// Initial status, normally `PENDING`.
    pub status: RunStatus,
    /// What creates it.
    pub source: RunSource,
    /// Its own overlap policy (`None`: the schedule's at fire time).
    pub overlap: Option<OverlapPolicy>,
    /// The workflow to launch.
    pub workflow_id: String,
    /// Its version.
    pub version: i32,
    /// The user to launch as.
    pub user_id: String,
}

/// Writes a run unless its key exists (invariant "one row per tick"). Returns whether a row
/// was written.
///
/// The primary key is `(idempotency_key, run_at)` (the table is partitioned by `run_at`). A
/// tick or backfill key determines its `run_at`, so that is the key alone; a manual run's key
/// is claimed in the ledger `run_keys` by a trigger in this same statement, so a key that
/// exists with another `run_at` writes nothing too.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn insert(db: impl PgExecutor<'_>, run: &NewRun, now: DateTime<Utc>) -> Result<bool> {
    let done = sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
         source, workflow_id, version, user_id, created_at, updated_at, overlap_override, \
         priority) \
         select $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11, \
           coalesce((select priority from schedules where schedule_id = $2), 0) \
         on conflict do nothing",
    )
    .bind(&run.idempotency_key)
    .bind(&run.schedule_id)
    .bind(run.run_at)
    .bind(run.fire_at)
    .bind(run.status.as_str())
    .bind(run.source.as_str())
    .bind(&run.workflow_id)
    .bind(run.version)
    .bind(&run.user_id)
    .bind(now)
    .bind(run.overlap.map(OverlapPolicy::as_str))
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The overlap policy the run `key` was written with (`Some(None)`: its schedule's), or
/// `None` when there is no such run.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails or the stored name is unknown.
pub async fn overlap_override(
    db: impl PgExecutor<'_>,
    key: &str,
) -> Result<Option<Option<OverlapPolicy>>> {
    let stored: Option<Option<String>> = sqlx::query_scalar(
        "select overlap_override from schedule_runs where idempotency_key = $1 limit 1",
    )
    .bind(key)
    .fetch_optional(db)
    .await?;
    let decode = |name: String| {
        OverlapPolicy::try_from(name).map_err(|err| sqlx::Error::Decode(Box::new(err)))
    };
    Ok(stored
        .map(|name| name.map(decode).transpose())
        .transpose()?)
}

/// Copies each schedule's priority onto its runs not yet published (`PENDING`, `RETRYING`,
/// `QUEUED`), where it differs: the dispatcher's claim orders by the run's own copy. A run
/// another transaction holds is skipped (a dispatcher round has claimed it already).
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn copy_priority(db: impl PgExecutor<'_>, schedule_ids: &[String]) -> Result<u64> {
    if schedule_ids.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query(&format!(
        "update schedule_runs r set priority = l.priority \
         from (select w.idempotency_key, w.run_at, s.priority from schedule_runs w \
               join schedules s on s.schedule_id = w.schedule_id \
               where s.schedule_id = any($1) and w.status in {UNPUBLISHED} \
                 and w.priority <> s.priority \
               for update of w skip locked) l \
         where r.idempotency_key = l.idempotency_key and r.run_at = l.run_at",
        UNPUBLISHED = *UNPUBLISHED,
    ))
    .bind(schedule_ids)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// One run by its key.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn get(db: impl PgExecutor<'_>, idempotency_key: &str) -> Result<Option<Run>> {
    let sql = format!("select {RUN_COLUMNS} from schedule_runs where idempotency_key = $1");
    Ok(sqlx::query_as::<_, RunRow>(&sql)
        .bind(idempotency_key)
        .fetch_optional(db)
        .await?
        .map(Run::from))
}

/// Most chain children [`children`] answers.
pub const CHILDREN_MAX: i64 = 100;

/// The runs a chain fired from run `parent_key` (their `parent_key`), oldest tick first
/// (then by key), at most [`CHILDREN_MAX`]. No index covers `parent_key`: this reads every
/// partition, which is fine for one run's page but not for a hot path.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn children(db: impl PgExecutor<'_>, parent_key: &str) -> Result<Vec<Run>> {
    let sql = format!(
        "select {RUN_COLUMNS} from schedule_runs where parent_key = $1 \
         order by run_at, idempotency_key limit $2"
    );
    Ok(sqlx::query_as::<_, RunRow>(&sql)
        .bind(parent_key)
        .bind(CHILDREN_MAX)
        .fetch_all(db)
        .await?
        .into_iter()
        .map(Run::from)
        .collect())
}

/// A schedule's runs, newest tick first (then by key, descending), optionally of one
/// status, and only those after `before` in that order (keyset pagination: the last run of
/// the previous page, by `run_at` and key).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn list_for_schedule(
    db: impl PgExecutor<'_>,
    schedule_id: &str,
    status: Option<RunStatus>,
    before: Option<(DateTime<Utc>, String)>,
    limit: i64,
) -> Result<Vec<Run>> {
    let (before_at, before_key) = before.unzip();
    let sql = format!(
        "select {RUN_COLUMNS} from schedule_runs \
         where schedule_id = $1 and ($2::text is null or status = $2) \
           and ($3::timestamptz is null or (run_at, idempotency_key) < ($3, $4)) \
         order by run_at desc, idempotency_key desc limit $5"
    );
    Ok(sqlx::query_as::<_, RunRow>(&sql)
        .bind(schedule_id)
        .bind(status.map(RunStatus::as_str))
        .bind(before_at)
        .bind(before_key)
        .bind(limit)
        .fetch_all(db)
        .await?
        .into_iter()
        .map(Run::from)
        .collect())
}

/// A planned (source `schedule`) run that was never published and whose tick is at or
/// after some instant: the runs a change of timetable may cancel or bring back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedRun {
    /// `RunKey` as hex.
    pub idempotency_key: String,
    /// Its schedule.
    pub schedule_id: String,
    /// The planned tick.
    pub run_at: DateTime<Utc>,
    /// `PENDING`, `QUEUED` or `CANCELLED`.
    pub status: RunStatus,
}

/// The row [`future_planned`] reads into a [`PlannedRun`].
#[derive(sqlx::FromRow)]
struct PlannedRunRow {
    idempotency_key: String,
    schedule_id: String,
    run_at: DateTime<Utc>,
    #[sqlx(try_from = "String")]
    status: RunStatus,
}

impl From<PlannedRunRow> for PlannedRun {
    fn from(row: PlannedRunRow) -> PlannedRun {
        PlannedRun {
            idempotency_key: row.idempotency_key,
            schedule_id: row.schedule_id,
            run_at: row.run_at,
            status: row.status,
        }
    }
}

/// The never-published planned runs of `schedule_ids` whose tick is at or after `from`,
/// including cancelled ones (a resume or a reschedule may want them back: their key is the
/// tick's key, so the planner could never write them again), but not one an operator
/// cancelled (`cancel_requested_at`): that cancel is final. Locks them, skipping the runs
/// another transaction holds: a dispatcher round holds its pre-staged runs until their tick,
/// and a write never waits for it; the round brings such a run in line with the schedule's
/// new revision before it publishes (`kairos_registrar::restage`).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn future_planned(
    db: impl PgExecutor<'_>,
    schedule_ids: &[String],
    from: DateTime<Utc>,
) -> Result<Vec<PlannedRun>> {
    let rows: Vec<PlannedRunRow> = sqlx::query_as(&format!(
        "select idempotency_key, schedule_id, run_at, status from schedule_runs \
         where schedule_id = any($1) and run_at >= $2 and source = 'schedule' \
           and published_at is null and status in {REVIVABLE} \
           and cancel_requested_at is null \
         order by schedule_id, run_at for update skip locked",
        REVIVABLE = *REVIVABLE,
    ))
    .bind(schedule_ids)
    .bind(from)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(PlannedRun::from).collect())
}

/// Keeps or brings back never-published runs: sets their `fire_at` and their schedule's
/// revision, and a `CANCELLED` one becomes `PENDING` again (it was never published, so this
/// cannot launch a tick twice). Returns how many rows changed.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn keep_planned(
    db: impl PgExecutor<'_>,
    keys: &[String],
    fire_ats: &[DateTime<Utc>],
    now: DateTime<Utc>,
) -> Result<u64> {
    if keys.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query(&format!(
        "update schedule_runs as r set fire_at = v.fire_at, updated_at = $3, \
           revision = (select s.revision from schedules s where s.schedule_id = r.schedule_id), \
           status = case when r.status = 'CANCELLED' then 'PENDING' else r.status end, \
           reason = case when r.status = 'CANCELLED' then null else r.reason end \
         from unnest($1::text[], $2::timestamptz[]) as v(idempotency_key, fire_at) \
         where r.idempotency_key = v.idempotency_key and r.published_at is null \
           and r.status in {REVIVABLE} \
           and r.cancel_requested_at is null",
        REVIVABLE = *REVIVABLE,
    ))
    .bind(keys)
    .bind(fire_ats)
    .bind(now)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Points the given never-published planned runs (source `schedule`) at what their
/// schedule launches now: its `workflow_id`, `version` and `user_id`. A deploy of version
/// N+1 thereby reaches the runs planned ahead under version N, so no tick after the deploy
/// launches N. Returns how many rows changed.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn follow_schedule(db: impl PgExecutor<'_>, keys: &[String]) -> Result<u64> {
    if keys.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query(
        "update schedule_runs as r set workflow_id = s.workflow_id, version = s.version, \
           user_id = s.user_id \
         from schedules s \
         where r.idempotency_key = any($1) and s.schedule_id = r.schedule_id \
           and r.source = 'schedule' and r.published_at is null \
           and (r.workflow_id, r.version, r.user_id) \
             is distinct from (s.workflow_id, s.version, s.user_id)",
    )
    .bind(keys)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Cancels the given runs if they are still unpublished. Returns how many changed.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn cancel(
    db: impl PgExecutor<'_>,
    keys: &[String],
    reason: &str,
    now: DateTime<Utc>,
) -> Result<u64> {
    if keys.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query(&format!(
        "update schedule_runs set status = 'CANCELLED', reason = $2, updated_at = $3 \
         where idempotency_key = any($1) and status in {PLANNED}",
        PLANNED = *PLANNED,
    ))
    .bind(keys)
    .bind(reason)
    .bind(now)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Cancels every unpublished run of `schedule_ids`, whatever its source or tick (pause and
/// delete: nothing more is launched), except those another transaction holds: a dispatcher
/// round holding a pre-staged run sees the schedule's new revision before it publishes, and
/// cancels the run itself (`kairos_registrar::restage`). Returns how many changed.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn cancel_unpublished(
    db: impl PgExecutor<'_>,
    schedule_ids: &[String],
    reason: &str,
    now: DateTime<Utc>,
) -> Result<u64> {
    if schedule_ids.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query(&format!(
        "update schedule_runs r set status = 'CANCELLED', reason = $2, updated_at = $3 \
         from (select idempotency_key, run_at from schedule_runs \
               where schedule_id = any($1) and status in {PLANNED} \
               for update skip locked) l \
         where r.idempotency_key = l.idempotency_key and r.run_at = l.run_at",
        PLANNED = *PLANNED,
    ))
    .bind(schedule_ids)
    .bind(reason)
    .bind(now)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// How many run rows are stored (for tests and operators).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn count(db: impl PgExecutor<'_>) -> Result<i64> {
    Ok(sqlx::query_scalar("select count(*) from schedule_runs")
        .fetch_one(db)
        .await?)
}

/// How many runs of each of `schedule_ids` are not yet published (`PENDING` or `QUEUED`):
/// what a dry-run compares before and after a change to say how many it would cancel.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn unpublished_counts(
    db: impl PgExecutor<'_>,
    schedule_ids: &[String],
) -> Result<Vec<(String, i64)>> {
    Ok(sqlx::query_as(&format!(
        "select schedule_id, count(*) from schedule_runs \
         where schedule_id = any($1) and status in {PLANNED} group by schedule_id",
        PLANNED = *PLANNED,
    ))
    .bind(schedule_ids)
    .fetch_all(db)
    .await?)
}
