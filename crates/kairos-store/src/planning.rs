//! The planner's statements (docs/design.md §1; invariants "one row per tick", "the database
//! clock decides" and "claims die with their holder"): claim due schedules with `for update
//! skip locked`, write a batch of run rows in one `unnest` insert (`on conflict do nothing`),
//! advance a batch of schedules in one `unnest` update.
//!
//! The caller holds one transaction across claim, insert and advance: the row locks of the
//! claim are the only coordination between planners, and they die with the transaction (a
//! killed planner releases its batch; the next planner re-plans it, hitting only `on
//! conflict do nothing` for rows a dead transaction never committed anyway).

use chrono::{DateTime, Utc};
use kairos_core::{CalendarRules, CatchupPolicy, OverlapPolicy, RunSource};
use sqlx::{PgConnection, PgExecutor};

use crate::rows::RulesRow;
use crate::Result;

/// A schedule claimed for planning: what `kairos_core::plan` and the run rows need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueSchedule {
    /// Primary key.
    pub schedule_id: String,
    /// Copied onto its runs.
    pub workflow_id: String,
    /// Copied onto its runs.
    pub version: i32,
    /// Copied onto its runs.
    pub user_id: String,
    /// The spec as written.
    pub cron_expr: String,
    /// IANA zone name.
    pub timezone: String,
    /// Window start (inclusive; also the `@every` anchor).
    pub start_at: Option<DateTime<Utc>>,
    /// Window end (inclusive).
    pub end_at: Option<DateTime<Utc>>,
    /// The first tick not yet planned (never NULL here: NULL rows are never due).
    pub next_run_at: DateTime<Utc>,
    /// Jitter bound in milliseconds.
    pub jitter_ms: i32,
    /// What to do with ticks older than the misfire grace.
    pub catchup_policy: CatchupPolicy,
    /// The `@every` anchor when there is no `start_at`.
    pub created_at: DateTime<Utc>,
    /// Exclusions, calendar names, roll and DST policy.
    pub rules: CalendarRules,
    /// How many more runs the planner may create (`max_runs` minus the runs it created so
    /// far, never below 0); `None`: no limit.
    pub remaining_runs: Option<i64>,
    /// Seconds after its tick by which a run must be final; `None`: no deadline.
    pub deadline_s: Option<i32>,
}

/// The row [`claim_due`] reads into a [`DueSchedule`].
#[derive(sqlx::FromRow)]
struct DueScheduleRow {
    schedule_id: String,
    workflow_id: String,
    version: i32,
    user_id: String,
    cron_expr: String,
    timezone: String,
    start_at: Option<DateTime<Utc>>,
    end_at: Option<DateTime<Utc>>,
    next_run_at: DateTime<Utc>,
    jitter_ms: i32,
    #[sqlx(try_from = "String")]
    catchup_policy: CatchupPolicy,
    created_at: DateTime<Utc>,
    #[sqlx(flatten)]
    rules: RulesRow,
    remaining_runs: Option<i64>,
    deadline_s: Option<i32>,
}

impl From<DueScheduleRow> for DueSchedule {
    fn from(row: DueScheduleRow) -> DueSchedule {
        DueSchedule {
            schedule_id: row.schedule_id,
            workflow_id: row.workflow_id,
            version: row.version,
            user_id: row.user_id,
            cron_expr: row.cron_expr,
            timezone: row.timezone,
            start_at: row.start_at,
            end_at: row.end_at,
            next_run_at: row.next_run_at,
            jitter_ms: row.jitter_ms,
            catchup_policy: row.catchup_policy,
            created_at: row.created_at,
            rules: row.rules.into(),
            remaining_runs: row.remaining_runs,
            deadline_s: row.deadline_s,
        }
    }
}

/// Locks and returns up to `limit` unpaused schedules whose `next_run_at <= due_before`,
/// oldest first, skipping rows another transaction holds. `due_before` must be computed from
/// the database clock (`now + lookahead`, invariant "the database clock decides").
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn claim_due(
    conn: &mut PgConnection,
    due_before: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<DueSchedule>> {
    // The predicate repeats the partial index `schedules_due` so that it is used; the order
    // makes the oldest backlog go first when more than `limit` are due. `remaining_runs` is
    // NULL without `max_runs` (`least` ignores a NULL argument, so it must stay outside the
    // subtraction: `greatest(NULL, 0)` is 0, which would exhaust every unlimited schedule).
    let rows: Vec<DueScheduleRow> = sqlx::query_as(
        "select schedule_id, workflow_id, version, user_id, cron_expr, timezone, start_at, \
         end_at, next_run_at, jitter_ms, catchup_policy, created_at, exclude, \
         exclude_calendars, roll, dst_gap, dst_fold, \
         max_runs - least(scheduled_runs, max_runs) as remaining_runs, deadline_s \
         from schedules \
         where not paused and next_run_at is not null and next_run_at <= $1 \
         order by next_run_at limit $2 for update skip locked",
    )
    .bind(due_before)
    .bind(limit)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(DueSchedule::from).collect())
}

/// Run rows to write in one statement, as columns. Every row is `PENDING` with one source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunRows {
    /// `RunKey` as hex.
    pub idempotency_keys: Vec<String>,
    /// The schedule of each row.
    pub schedule_ids: Vec<String>,
    /// The tick (whole seconds).
    pub run_ats: Vec<DateTime<Utc>>,
    /// When the dispatcher may publish it.
    pub fire_ats: Vec<DateTime<Utc>>,
    /// The workflow to launch.
    pub workflow_ids: Vec<String>,
    /// Its version.
    pub versions: Vec<i32>,
    /// The user to launch as.
    pub user_ids: Vec<String>,
}

impl RunRows {
    /// How many rows.
    pub fn len(&self) -> usize {
        self.idempotency_keys.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.idempotency_keys.is_empty()
    }
}

/// Inserts `rows` as `PENDING` with `source` (`schedule`, `backfill`) and their own overlap
/// policy, if any, at their schedule's revision, skipping keys that exist (invariant "one row
/// per tick"). Returns how many rows were written.
/// A tick (source `schedule`) of a schedule with `deadline_s` gets its deadline
/// (`run_at + deadline_s`); a backfill's ticks, planned after the fact, get none.
/// A tick of the planner (`source = schedule`) that an operator skipped (`schedule_skips`)
/// is written `SKIPPED` with the reason [`kairos_core::skip_reason`] gives, never launched.
/// The conflict target is the primary key `(idempotency_key, run_at)`: a tick key is
/// sha256 of the schedule and the tick's epoch seconds, so it conflicts exactly when the key
/// exists. Keys already stored are left out before the insert: `on conflict` waits for the
/// transaction of a conflicting row that is being updated (a schedule write keeping its
/// planned runs), and a planner waiting there holds its claimed schedules, so writes to
/// them would wait in turn; the `on conflict` stays for keys inserted concurrently.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails (a CHECK, e.g. a fractional run_at).
pub async fn insert_runs(
    db: impl PgExecutor<'_>,
    rows: &RunRows,
    source: RunSource,
    overlap: Option<OverlapPolicy>,
    now: DateTime<Utc>,
) -> Result<u64> {
    if rows.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
         source, workflow_id, version, user_id, created_at, updated_at, overlap_override, \
         priority, revision, schedule_revision, deadline_at, deadline_open, reason, \
         finished_at) \
         select k, s, r, f, case when sk.run_at is null then 'PENDING' else 'SKIPPED' end, \
           $8, w, v, u, $9, $9, $10, coalesce(sc.priority, 0), sc.revision, sc.revision, \
           d.at, d.at is not null, \
           'skipped by ' || sk.skipped_by || coalesce(': ' || sk.note, ''), \
           case when sk.run_at is not null then $9::timestamptz end \
         from unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[], \
                     $5::text[], $6::int4[], $7::text[]) as t(k, s, r, f, w, v, u) \
         left join schedules sc on sc.schedule_id = t.s \
         left join schedule_skips sk on $8 = 'schedule' and sk.schedule_id = t.s \
           and sk.run_at = t.r \
         cross join lateral (select case when $8 = 'schedule' \
           then t.r + make_interval(secs => sc.deadline_s) end as at) as d \
         where not exists (select 1 from schedule_runs e \
                           where e.idempotency_key = t.k and e.run_at = t.r) \
         on conflict (idempotency_key, run_at) do nothing",
    )
    .bind(&rows.idempotency_keys)
    .bind(&rows.schedule_ids)
    .bind(&rows.run_ats)
    .bind(&rows.fire_ats)
    .bind(&rows.workflow_ids)
    .bind(&rows.versions)
    .bind(&rows.user_ids)
    .bind(source.as_str())
    .bind(now)
    .bind(overlap.map(OverlapPolicy::as_str))
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Where each planned schedule moves, as columns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Advances {
    /// The schedules (each claimed in the caller's transaction).
    pub schedule_ids: Vec<String>,
    /// The new `next_run_at`; `None` when exhausted or parked.
    pub next_run_ats: Vec<Option<DateTime<Utc>>>,
    /// Missed ticks to add to `missed_ticks`.
    pub missed: Vec<i64>,
    /// `None` after a successful plan; why it was parked otherwise.
    pub errors: Vec<Option<String>>,
    /// Runs planned, to add to `scheduled_runs` (what `max_runs` counts).
    pub planned: Vec<i64>,
}

impl Advances {
    /// Adds one schedule.
    pub fn push(
        &mut self,
        schedule_id: &str,
        next_run_at: Option<DateTime<Utc>>,
        missed: i64,
        error: Option<String>,
    ) {
        self.push_with_runs(schedule_id, next_run_at, missed, error, 0);
    }

    /// Adds one schedule for which `planned` runs were written.
    pub fn push_with_runs(
        &mut self,
        schedule_id: &str,
        next_run_at: Option<DateTime<Utc>>,
        missed: i64,
        error: Option<String>,
        planned: i64,
    ) {
        self.schedule_ids.push(schedule_id.to_string());
        self.next_run_ats.push(next_run_at);
        self.missed.push(missed);
        self.errors.push(error);
        self.planned.push(planned);
    }
}

/// Moves each schedule's `next_run_at`, adds its missed ticks and its planned runs
/// (`scheduled_runs`, which `max_runs` limits) and sets `planner_error`, in one statement.
/// The caller holds the row locks of the claim, in the transaction that inserts the runs, so
/// the count and the runs commit together and no other planner reads a stale count. `revision` and `updated_at` are left alone: they belong to the registrar
/// (so an advance neither wakes planners nor fails a concurrent registrar write). Returns
/// how many rows changed.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn advance(db: impl PgExecutor<'_>, advances: &Advances) -> Result<u64> {
    if advances.schedule_ids.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query(
        "update schedules as s set next_run_at = v.next_run_at, \
           missed_ticks = s.missed_ticks + v.missed, planner_error = v.error, \
           scheduled_runs = s.scheduled_runs + v.planned \
         from unnest($1::text[], $2::timestamptz[], $3::int8[], $4::text[], $5::int8[]) \
           as v(schedule_id, next_run_at, missed, error, planned) \
         where s.schedule_id = v.schedule_id",
    )
    .bind(&advances.schedule_ids)
    .bind(&advances.next_run_ats)
    .bind(&advances.missed)
    .bind(&advances.errors)
    .bind(&advances.planned)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// The earliest `next_run_at` of an unpaused schedule (what the planner sleeps towards), or
/// `None` when nothing is scheduled. One step down the partial index `schedules_due`.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn earliest_next_run(db: impl PgExecutor<'_>) -> Result<Option<DateTime<Utc>>> {
    Ok(sqlx::query_scalar(
        "select min(next_run_at) from schedules where not paused and next_run_at is not null",
    )
    .fetch_one(db)
    .await?)
}

/// A schedule's planner bookkeeping: missed ticks so far and why it is parked, if it is.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn planner_stats(
    db: impl PgExecutor<'_>,
    schedule_id: &str,
) -> Result<Option<(i64, Option<String>)>> {
    Ok(
        sqlx::query_as("select missed_ticks, planner_error from schedules where schedule_id = $1")
            .bind(schedule_id)
            .fetch_optional(db)
            .await?,
    )
}
