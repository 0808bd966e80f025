//! Skipped ticks (`schedule_skips`): one occurrence of a schedule an operator asked not to
//! run, and the run of that tick marked `SKIPPED` (or brought back when the skip is taken
//! back). The planner's insert (`planning::insert_runs`) writes a skipped tick's run as
//! `SKIPPED` itself, with the reason [`kairos_core::skip_reason`] gives.

use chrono::{DateTime, Utc};
use kairos_core::{Schedule, Skip};
use sqlx::postgres::PgRow;
use sqlx::{FromRow, PgExecutor, Row};

use crate::groups::REVIVABLE;
use crate::rows::ScheduleRow;
use crate::schedules::COLUMNS;
use crate::Result;

/// The columns of [`Skip`], in order.
const SKIP_COLUMNS: &str = "schedule_id, run_at, note, skipped_by, created_at";

struct SkipRow(Skip);

impl<'r> FromRow<'r, PgRow> for SkipRow {
    fn from_row(row: &'r PgRow) -> sqlx::Result<Self> {
        Ok(SkipRow(Skip {
            schedule_id: row.try_get("schedule_id")?,
            run_at: row.try_get("run_at")?,
            note: row.try_get("note")?,
            skipped_by: row.try_get("skipped_by")?,
            created_at: row.try_get("created_at")?,
        }))
    }
}

/// Stores a skip. Returns `None` when that tick is already skipped (the stored skip is
/// left as it is).
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn insert(db: impl PgExecutor<'_>, skip: &Skip) -> Result<Option<Skip>> {
    let sql = format!(
        "insert into schedule_skips ({SKIP_COLUMNS}) values ($1, $2, $3, $4, $5) \
         on conflict (schedule_id, run_at) do nothing returning {SKIP_COLUMNS}"
    );
    Ok(sqlx::query_as::<_, SkipRow>(&sql)
        .bind(&skip.schedule_id)
        .bind(skip.run_at)
        .bind(&skip.note)
        .bind(&skip.skipped_by)
        .bind(skip.created_at)
        .fetch_optional(db)
        .await?
        .map(|row| row.0))
}

/// One skip, if that tick is skipped.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn get(
    db: impl PgExecutor<'_>,
    schedule_id: &str,
    run_at: DateTime<Utc>,
) -> Result<Option<Skip>> {
    let sql =
        format!("select {SKIP_COLUMNS} from schedule_skips where schedule_id = $1 and run_at = $2");
    Ok(sqlx::query_as::<_, SkipRow>(&sql)
        .bind(schedule_id)
        .bind(run_at)
        .fetch_optional(db)
        .await?
        .map(|row| row.0))
}

/// A schedule's skips with a tick at or after `from` (`None`: all of them, past ones
/// included), in tick order, at most `limit`.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn list(
    db: impl PgExecutor<'_>,
    schedule_id: &str,
    from: Option<DateTime<Utc>>,
    limit: i64,
) -> Result<Vec<Skip>> {
    let sql = format!(
        "select {SKIP_COLUMNS} from schedule_skips \
         where schedule_id = $1 and ($2::timestamptz is null or run_at >= $2) \
         order by run_at limit $3"
    );
    Ok(sqlx::query_as::<_, SkipRow>(&sql)
        .bind(schedule_id)
        .bind(from)
        .bind(limit)
        .fetch_all(db)
        .await?
        .into_iter()
        .map(|row| row.0)
        .collect())
}

/// The skips of the given ticks (pairs of schedule and tick) that exist.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn of_ticks(
    db: impl PgExecutor<'_>,
    schedule_ids: &[String],
    run_ats: &[DateTime<Utc>],
) -> Result<Vec<Skip>> {
    if schedule_ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "select {SKIP_COLUMNS} from schedule_skips \
         where (schedule_id, run_at) in \
           (select * from unnest($1::text[], $2::timestamptz[]))"
    );
    Ok(sqlx::query_as::<_, SkipRow>(&sql)
        .bind(schedule_ids)
        .bind(run_ats)
        .fetch_all(db)
        .await?
        .into_iter()
        .map(|row| row.0)
        .collect())
}

/// Deletes a skip. Returns it, or `None` when that tick was not skipped.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn delete(
    db: impl PgExecutor<'_>,
    schedule_id: &str,
    run_at: DateTime<Utc>,
) -> Result<Option<Skip>> {
    let sql = format!(
        "delete from schedule_skips where schedule_id = $1 and run_at = $2 \
         returning {SKIP_COLUMNS}"
    );
    Ok(sqlx::query_as::<_, SkipRow>(&sql)
        .bind(schedule_id)
        .bind(run_at)
        .fetch_optional(db)
        .await?
        .map(|row| row.0))
}

/// Deletes at most `limit` skips whose tick is before `older_than` (retention). Returns
/// how many.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn delete_old(
    db: impl PgExecutor<'_>,
    older_than: DateTime<Utc>,
    limit: i64,
) -> Result<u64> {
    let done = sqlx::query(
        "delete from schedule_skips where (schedule_id, run_at) in ( \
           select schedule_id, run_at from schedule_skips where run_at < $1 \
           order by run_at limit $2 for update skip locked)",
    )
    .bind(older_than)
    .bind(limit)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// What marking a tick's run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marked {
    /// Runs changed.
    pub changed: u64,
    /// Unpublished runs of the tick another transaction holds (a dispatcher round that
    /// pre-staged it): left as they are, for the round to restage.
    pub held: u64,
}

/// Marks the never-published run of a schedule's tick (`PENDING`, `QUEUED`, or cancelled by
/// a pause) `SKIPPED` with `reason`, skipping a run another transaction holds: a write never
/// waits for a dispatcher round (the caller then moves the schedule's revision, and the
/// round restages the run and finds the skip).
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn mark_skipped(
    db: impl PgExecutor<'_>,
    schedule_id: &str,
    run_at: DateTime<Utc>,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<Marked> {
    let (changed, unpublished): (i64, i64) = sqlx::query_as(&format!(
        "with tick as ( \
           select idempotency_key, run_at from schedule_runs \
           where schedule_id = $1 and run_at = $2 and source = 'schedule' \
             and published_at is null and status in {REVIVABLE} \
             and cancel_requested_at is null), \
         free as (select t.idempotency_key, t.run_at from schedule_runs r \
           join tick t on r.idempotency_key = t.idempotency_key and r.run_at = t.run_at \
           for update of r skip locked), \
         changed as ( \
           update schedule_runs r set status = 'SKIPPED', reason = $3, finished_at = $4, \
             updated_at = $4 \
           from free f where r.idempotency_key = f.idempotency_key and r.run_at = f.run_at \
           returning 1) \
         select (select count(*) from changed), (select count(*) from tick)",
        REVIVABLE = *REVIVABLE,
    ))
    .bind(schedule_id)
    .bind(run_at)
    .bind(reason)
    .bind(now)
    .fetch_one(db)
    .await?;
    let changed = u64::try_from(changed).unwrap_or(0);
    let held = u64::try_from(unpublished)
        .unwrap_or(0)
        .saturating_sub(changed);
    Ok(Marked { changed, held })
}

/// Marks the given runs (held by the caller's transaction) `SKIPPED`, each with its reason.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn mark_runs_skipped(
    db: impl PgExecutor<'_>,
    keys: &[String],
    reasons: &[String],
    now: DateTime<Utc>,
) -> Result<u64> {
    if keys.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query(&format!(
        "update schedule_runs r set status = 'SKIPPED', reason = v.reason, finished_at = $3, \
           updated_at = $3 \
         from unnest($1::text[], $2::text[]) as v(key, reason) \
         where r.idempotency_key = v.key and r.published_at is null \
           and r.status in {REVIVABLE}",
        REVIVABLE = *REVIVABLE,
    ))
    .bind(keys)
    .bind(reasons)
    .bind(now)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Brings back the run a skip marked (`SKIPPED` with exactly `reason`, never published):
/// `PENDING` again at its schedule's revision, or `CANCELLED` with `paused_reason` while
/// the schedule is paused (a resume revives it). Returns how many runs changed.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn unmark_skipped(
    db: impl PgExecutor<'_>,
    schedule_id: &str,
    run_at: DateTime<Utc>,
    reason: &str,
    paused_reason: &str,
    now: DateTime<Utc>,
) -> Result<u64> {
    let done = sqlx::query(
        "update schedule_runs r set \
           status = case when s.paused then 'CANCELLED' else 'PENDING' end, \
           reason = case when s.paused then $4 end, finished_at = null, updated_at = $5, \
           revision = s.revision \
         from schedules s \
         where s.schedule_id = r.schedule_id and r.schedule_id = $1 and r.run_at = $2 \
           and r.source = 'schedule' and r.status = 'SKIPPED' and r.reason = $3 \
           and r.published_at is null",
    )
    .bind(schedule_id)
    .bind(run_at)
    .bind(reason)
    .bind(paused_reason)
    .bind(now)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// One schedule by id, locked until the caller's transaction ends (waiting for a planner
/// pass that holds it): a skip written under this lock is seen by every later pass, and a
/// pass that planned the tick before has committed its run.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn get_for_update(
    db: impl PgExecutor<'_>,
    schedule_id: &str,
) -> Result<Option<Schedule>> {
    let sql = format!("select {COLUMNS} from schedules where schedule_id = $1 for update");
    Ok(sqlx::query_as::<_, ScheduleRow>(&sql)
        .bind(schedule_id)
        .fetch_optional(db)
        .await?
        .map(Schedule::from))
}

/// Moves a schedule to a new revision without changing anything else: a write that found
/// one of its runs held by a dispatcher round (a skip) so that the round restages it.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn touch(db: impl PgExecutor<'_>, schedule_id: &str, now: DateTime<Utc>) -> Result<()> {
    sqlx::query(
        "update schedules set revision = revision + 1, updated_at = $2 where schedule_id = $1",
    )
    .bind(schedule_id)
    .bind(now)
    .execute(db)
    .await?;
    Ok(())
}
