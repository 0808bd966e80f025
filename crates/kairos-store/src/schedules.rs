//! Statements on `schedules`. Writes are bulk (`unnest` of column arrays) so that a deploy
//! of 10,000 schedules is a handful of statements; a single upsert uses the same code with
//! one row. Updates are compare-and-set on `revision` (optimistic concurrency). Rows are
//! read into and written from `kairos_core::Schedule`.

use chrono::{DateTime, Utc};
use kairos_core::{CalendarRules, FailurePolicy, Schedule};
use sqlx::{PgExecutor, Postgres, QueryBuilder};

use crate::rows::ScheduleRow;
use crate::Result;

/// The columns of [`Schedule`], in order, for `select` and `returning`.
pub(crate) const COLUMNS: &str =
    "schedule_id, workflow_id, version, user_id, cron_expr, timezone, \
    start_at, end_at, next_run_at, paused, jitter_ms, overlap_policy, catchup_policy, \
    priority, max_run_seconds, max_queued, max_attempts, retry_intervals_s, \
    retry_backoff_initial_s, retry_backoff_multiplier, retry_backoff_max_s, \
    heartbeat_timeout_s, start_timeout_s, exclude, exclude_calendars, roll, dst_gap, \
    dst_fold, max_runs, scheduled_runs, pause_note, revision, created_at, updated_at, \
    max_in_flight, deadline_s, paused_until, paused_by, region, fallback_regions";

/// Locks and returns up to `limit` schedules matching `filter` (SQL over `schedules`, with
/// `$1` bound to `now`), in `order`, skipping rows another transaction holds: the shape of
/// every sweep-like claim of whole schedules (ended pauses, paused ticks to record).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub(crate) async fn claim_where(
    db: impl sqlx::PgExecutor<'_>,
    filter: &str,
    order: &str,
    now: chrono::DateTime<chrono::Utc>,
    limit: i64,
) -> Result<Vec<kairos_core::Schedule>> {
    let sql = format!(
        "select {COLUMNS} from schedules where {filter} \
         order by {order} limit $2 for update skip locked"
    );
    Ok(sqlx::query_as::<_, crate::rows::ScheduleRow>(&sql)
        .bind(now)
        .bind(limit)
        .fetch_all(db)
        .await?
        .into_iter()
        .map(kairos_core::Schedule::from)
        .collect())
}

/// One schedule by id.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn get(db: impl PgExecutor<'_>, schedule_id: &str) -> Result<Option<Schedule>> {
    let sql = format!("select {COLUMNS} from schedules where schedule_id = $1");
    Ok(sqlx::query_as::<_, ScheduleRow>(&sql)
        .bind(schedule_id)
        .fetch_optional(db)
        .await?
        .map(Schedule::from))
}

/// The schedules of `workflow_id` plus those named in `schedule_ids` (whatever their
/// workflow), for a deploy sync that must see both sides.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn for_sync(
    db: impl PgExecutor<'_>,
    workflow_id: &str,
    schedule_ids: &[String],
) -> Result<Vec<Schedule>> {
    let sql = format!(
        "select {COLUMNS} from schedules where workflow_id = $1 or schedule_id = any($2) \
         order by schedule_id"
    );
    Ok(sqlx::query_as::<_, ScheduleRow>(&sql)
        .bind(workflow_id)
        .bind(schedule_ids)
        .fetch_all(db)
        .await?
        .into_iter()
        .map(Schedule::from)
        .collect())
}

/// Filters of [`list`]; `None` means "any".
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only this workflow's schedules.
    pub workflow_id: Option<String>,
    /// Only this user's schedules.
    pub user_id: Option<String>,
    /// Only paused (or only unpaused) schedules.
    pub paused: Option<bool>,
    /// Only schedules whose schedule id, workflow id or user id contains this text,
    /// ignoring case; `%`, `_` and `\` in it match themselves.
    pub q: Option<String>,
    /// Only schedules whose workflow id contains this text, ignoring case (the operator
    /// page's workflow filter).
    pub workflow_contains: Option<String>,
    /// Only schedules whose user id contains this text, ignoring case (the operator page's
    /// user filter).
    pub user_contains: Option<String>,
    /// Only schedule ids strictly greater than this (the cursor of the previous page).
    pub after: Option<String>,
    /// Page size.
    pub limit: i64,
}

/// An `ilike` pattern matching any text that contains `text`: its `%`, `_` and `\` are
/// escaped (with `\`, the escape character of the statements below) so they match
/// literally.
pub fn contains_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// A page of schedules in `schedule_id` order (keyset pagination: stable under inserts).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn list(db: impl PgExecutor<'_>, filter: &ListFilter) -> Result<Vec<Schedule>> {
    let sql = format!(
        "select {COLUMNS} from schedules \
         where ($1::text is null or workflow_id = $1) \
           and ($2::text is null or user_id = $2) \
           and ($3::bool is null or paused = $3) \
           and ($4::text is null or schedule_id > $4) \
           and ($6::text is null or schedule_id ilike $6 escape '\\' \
                or workflow_id ilike $6 escape '\\' or user_id ilike $6 escape '\\') \
           and ($7::text is null or workflow_id ilike $7 escape '\\') \
           and ($8::text is null or user_id ilike $8 escape '\\') \
         order by schedule_id limit $5"
    );
    let pattern = |text: &Option<String>| text.as_deref().map(contains_pattern);
    Ok(sqlx::query_as::<_, ScheduleRow>(&sql)
        .bind(&filter.workflow_id)
        .bind(&filter.user_id)
        .bind(filter.paused)
        .bind(&filter.after)
        .bind(filter.limit)
        .bind(pattern(&filter.q))
        .bind(pattern(&filter.workflow_contains))
        .bind(pattern(&filter.user_contains))
        .fetch_all(db)
        .await?
        .into_iter()
        .map(Schedule::from)
        .collect())
}

/// Inserts new schedules; a row whose id already exists is left alone and missing from the
/// answer (a concurrent creator won). Returns the rows written.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn insert_many(
    db: impl PgExecutor<'_>,
    rows: &[Schedule],
    now: DateTime<Utc>,
) -> Result<Vec<Schedule>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let mut query = QueryBuilder::<Postgres>::new(
        "insert into schedules (schedule_id, workflow_id, version, user_id, cron_expr, \
         timezone, start_at, end_at, next_run_at, paused, jitter_ms, overlap_policy, \
         catchup_policy, priority, max_run_seconds, max_attempts, retry_intervals_s, \
         retry_backoff_initial_s, retry_backoff_multiplier, retry_backoff_max_s, \
         heartbeat_timeout_s, start_timeout_s, exclude, exclude_calendars, roll, dst_gap, \
         dst_fold, max_queued, max_runs, chain_parent, chain_on, revision, created_at, \
         updated_at, max_in_flight, deadline_s, region, fallback_regions) \
         select v.schedule_id, v.workflow_id, v.version, v.user_id, v.cron_expr, \
         v.timezone, v.start_at, v.end_at, v.next_run_at, v.paused, v.jitter_ms, \
         v.overlap_policy, v.catchup_policy, v.priority, v.max_run_seconds, v.max_attempts, \
         v.retry_intervals_s::int4[], v.retry_backoff_initial_s, v.retry_backoff_multiplier, \
         v.retry_backoff_max_s, v.heartbeat_timeout_s, v.start_timeout_s, v.exclude::jsonb, \
         v.exclude_calendars::jsonb, v.roll, v.dst_gap, v.dst_fold, v.max_queued, v.max_runs, \
         v.chain_parent, v.chain_on, 1, v.created_at, ",
    );
    query.push_bind(now);
    query.push(", v.max_in_flight, v.deadline_s, v.region, v.fallback_regions::text[] from ");
    push_unnest(&mut query, rows);
    query.push(" on conflict (schedule_id) do nothing returning ");
    query.push(COLUMNS);
    let written: Vec<ScheduleRow> = query.build_query_as().fetch_all(db).await?;
    Ok(written.into_iter().map(Schedule::from).collect())
}

/// Updates schedules whose stored revision still equals [`Schedule::revision`]
/// (compare-and-set), incrementing it. Rows changed by someone else since they were read
/// are left alone and missing from the answer. Returns the rows written.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
// Invariant: when the timing (spec, zone, window, paused) is unchanged, the stored
// next_run_at is kept: a planner may have advanced it since the registrar read the row.
pub async fn update_many(
    db: impl PgExecutor<'_>,
    rows: &[Schedule],
    now: DateTime<Utc>,
) -> Result<Vec<Schedule>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let mut query = QueryBuilder::<Postgres>::new(
        "update schedules as s set workflow_id = v.workflow_id, version = v.version, \
         user_id = v.user_id, cron_expr = v.cron_expr, timezone = v.timezone, \
         start_at = v.start_at, end_at = v.end_at, \
         next_run_at = case when s.scheduled_runs >= v.max_runs then null \
             when (s.cron_expr, s.timezone, s.start_at, s.end_at, s.paused, \
               s.exclude, s.exclude_calendars, s.roll, s.dst_gap, s.dst_fold, s.max_runs) \
             is not distinct from (v.cron_expr, v.timezone, v.start_at, v.end_at, v.paused, \
               v.exclude::jsonb, v.exclude_calendars::jsonb, v.roll, v.dst_gap, v.dst_fold, \
               v.max_runs) \
             then s.next_run_at else v.next_run_at end, \
         max_runs = v.max_runs, chain_parent = v.chain_parent, chain_on = v.chain_on, \
         exclude = v.exclude::jsonb, exclude_calendars = v.exclude_calendars::jsonb, \
         roll = v.roll, dst_gap = v.dst_gap, dst_fold = v.dst_fold, \
         paused = v.paused, jitter_ms = v.jitter_ms, overlap_policy = v.overlap_policy, \
         catchup_policy = v.catchup_policy, priority = v.priority, \
         max_run_seconds = v.max_run_seconds, max_attempts = v.max_attempts, \
         retry_intervals_s = v.retry_intervals_s::int4[], \
         retry_backoff_initial_s = v.retry_backoff_initial_s, \
         retry_backoff_multiplier = v.retry_backoff_multiplier, \
         retry_backoff_max_s = v.retry_backoff_max_s, \
         heartbeat_timeout_s = v.heartbeat_timeout_s, start_timeout_s = v.start_timeout_s, \
         max_queued = v.max_queued, max_in_flight = v.max_in_flight, \
         deadline_s = v.deadline_s, region = v.region, \
         fallback_regions = v.fallback_regions::text[], \
         revision = s.revision + 1, updated_at = ",
    );
    query.push_bind(now);
    query.push(" from ");
    push_unnest(&mut query, rows);
    query.push(" where s.schedule_id = v.schedule_id and s.revision = v.revision returning ");
    query.push(prefixed_columns("s"));
    let written: Vec<ScheduleRow> = query.build_query_as().fetch_all(db).await?;
    Ok(written.into_iter().map(Schedule::from).collect())
}

/// `unnest($1, ..., $22) as v(<columns>)`: the rows as one relation, one bind per column.
fn push_unnest(query: &mut QueryBuilder<'_, Postgres>, rows: &[Schedule]) {
    fn col<T, F: Fn(&Schedule) -> T>(rows: &[Schedule], f: F) -> Vec<T> {
        rows.iter().map(f).collect()
    }
    query.push("unnest(");
    let mut args = query.separated(", ");
    args.push_bind(col(rows, |r| r.schedule_id.clone()));
    args.push_unseparated("::text[]");
    args.push_bind(col(rows, |r| r.workflow_id.clone()));
    args.push_unseparated("::text[]");
    args.push_bind(col(rows, |r| r.version));
    args.push_unseparated("::int4[]");
    args.push_bind(col(rows, |r| r.user_id.clone()));
    args.push_unseparated("::text[]");
    args.push_bind(col(rows, |r| r.cron_expr.clone()));
    args.push_unseparated("::text[]");
    args.push_bind(col(rows, |r| r.timezone.clone()));
    args.push_unseparated("::text[]");
    args.push_bind(col(rows, |r| r.start_at));
    args.push_unseparated("::timestamptz[]");
    args.push_bind(col(rows, |r| r.end_at));
    args.push_unseparated("::timestamptz[]");
    args.push_bind(col(rows, |r| r.next_run_at));
    args.push_unseparated("::timestamptz[]");
    args.push_bind(col(rows, |r| r.paused));
    args.push_unseparated("::bool[]");
    args.push_bind(col(rows, |r| r.jitter_ms));
    args.push_unseparated("::int4[]");
    args.push_bind(col(rows, |r| r.overlap_policy.as_str()));
    args.push_unseparated("::text[]");
    args.push_bind(col(rows, |r| r.catchup_policy.as_str()));
    args.push_unseparated("::text[]");
    args.push_bind(col(rows, |r| r.priority));
    args.push_unseparated("::int4[]");
    args.push_bind(col(rows, |r| r.max_run_seconds));
    args.push_unseparated("::int4[]");
    args.push_bind(col(rows, |r| r.failure.max_attempts));
    args.push_unseparated("::int4[]");
    args.push_bind(col(rows, |r| intervals_literal(&r.failure)));
    args.push_unseparated("::text[]");
    args.push_bind(col(rows, |r| r.failure.retry_backoff_initial_s));
    args.push_unseparated("::int4[]");
    args.push_bind(col(rows, |r| r.failure.retry_backoff_multiplier));
    args.push_unseparated("::float8[]");
    args.push_bind(col(rows, |r| r.failure.retry_backoff_max_s));
    args.push_unseparated("::int4[]");
    args.push_bind(col(rows, |r| r.failure.heartbeat_timeout_s));
    args.push_unseparated("::int4[]");
    args.push_bind(col(rows, |r| r.failure.start_timeout_s));
    args.push_unseparated("::int4[]");
    args.push_bind(col(rows, |r| exclude_json(&r.rules)));
    args.push_unseparated("::text[]");
    args.push_bind(col(rows, |r| calendars_json(&r.rules)));
    args.push_unseparated("::text[]");
    args.push_bind(col(rows, |r| r.rules.roll.as_str()));
    args.push_unseparated("::text[]");
    args.push_bind(col(rows, |r| r.rules.dst_gap.map(|g| g.as_str())));
    args.push_unseparated("::text[]");
    args.push_bind(col(rows, |r| r.rules.dst_fold.map(|f| f.as_str())));
    args.push_unseparated("::text[]");
    args.push_bind(col(rows, |r| r.max_queued));
    args.push_unseparated("::int4[]");
    args.push_bind(col(rows, |r| r.max_runs));
    args.push_unseparated("::int4[]");
    // A chained schedule's parent and outcome (`@after`), stored beside its spec so that
    // the chain trigger finds a schedule's children by index.
    args.push_bind(col(rows, |r| crate::timing::chain(r).map(|c| c.parent)));
    args.push_unseparated("::text[]");
    args.push_bind(col(rows, |r| {
        crate::timing::chain(r).map(|c| c.on.as_str())
    }));
    args.push_unseparated("::text[]");
    args.push_bind(col(rows, |r| r.revision));
    args.push_unseparated("::int8[]");
    args.push_bind(col(rows, |r| r.created_at));
    args.push_unseparated("::timestamptz[]");
    args.push_bind(col(rows, |r| r.max_in_flight));
    args.push_unseparated("::int4[]");
    args.push_bind(col(rows, |r| r.deadline_s));
    args.push_unseparated("::int4[]");
    args.push_bind(col(rows, |r| r.region.clone()));
    args.push_unseparated("::text[]");
    args.push_bind(col(rows, |r| regions_literal(&r.fallback_regions)));
    args.push_unseparated("::text[]");
    query.push(
        ") as v(schedule_id, workflow_id, version, user_id, cron_expr, timezone, start_at, \
         end_at, next_run_at, paused, jitter_ms, overlap_policy, catchup_policy, priority, \
         max_run_seconds, max_attempts, retry_intervals_s, retry_backoff_initial_s, \
         retry_backoff_multiplier, retry_backoff_max_s, heartbeat_timeout_s, start_timeout_s, \
         exclude, exclude_calendars, roll, dst_gap, dst_fold, max_queued, max_runs, \
         chain_parent, chain_on, revision, created_at, max_in_flight, deadline_s, region, \
         fallback_regions)",
    );
}

/// The intervals as a PostgreSQL array literal (bulk writes pass one text per row).
fn intervals_literal(failure: &FailurePolicy) -> Option<String> {
    failure.retry_intervals_s.as_ref().map(|intervals| {
        let items: Vec<String> = intervals.iter().map(i32::to_string).collect();
        format!("{{{}}}", items.join(","))
    })
}

/// The fallback regions as a PostgreSQL array literal (bulk writes pass one text per row;
/// region names hold only lowercase letters, digits and `-`, so none needs quoting).
fn regions_literal(regions: &[String]) -> String {
    format!("{{{}}}", regions.join(","))
}

/// `exclude` as one JSON array (bulk writes pass one text per row).
fn exclude_json(rules: &CalendarRules) -> String {
    serde_json::Value::from(rules.exclude.clone()).to_string()
}

/// `exclude_calendars` as one JSON array (bulk writes pass one text per row).
fn calendars_json(rules: &CalendarRules) -> String {
    serde_json::Value::from(rules.exclude_calendars.clone()).to_string()
}

/// Which of `schedule_ids` exist.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn existing(db: impl PgExecutor<'_>, schedule_ids: &[String]) -> Result<Vec<String>> {
    Ok(
        sqlx::query_scalar("select schedule_id from schedules where schedule_id = any($1)")
            .bind(schedule_ids)
            .fetch_all(db)
            .await?,
    )
}

fn prefixed_columns(alias: &str) -> String {
    COLUMNS
        .split(", ")
        .map(|column| format!("{alias}.{column}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a pause or resume writes: `note`, `until` and `by` are kept while paused and
/// cleared on resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PauseWrite<'a> {
    /// Paused (true) or running.
    pub paused: bool,
    /// Why it is paused.
    pub note: Option<&'a str>,
    /// When it resumes by itself.
    pub until: Option<DateTime<Utc>>,
    /// Who paused it.
    pub by: Option<&'a str>,
    /// The tick to plan from (resume) or the one kept (pause).
    pub next_run_at: Option<DateTime<Utc>>,
}

/// Sets `paused` (and the `next_run_at` to resume from, and the pause note, end and author:
/// kept while paused, cleared on resume) if the revision is still `revision`. Returns the
/// row written, or `None` when it changed or vanished meanwhile.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn set_paused(
    db: impl PgExecutor<'_>,
    schedule_id: &str,
    write: PauseWrite<'_>,
    revision: i64,
    now: DateTime<Utc>,
) -> Result<Option<Schedule>> {
    let sql = format!(
        "update schedules set paused = $2, next_run_at = $3, revision = revision + 1, \
         updated_at = $5, paused_at = case when $2 then coalesce(paused_at, $5) end, \
         pause_note = case when $2 then $6 end, paused_until = case when $2 then $7 end, \
         paused_by = case when $2 then $8 end \
         where schedule_id = $1 and revision = $4 returning {COLUMNS}"
    );
    Ok(sqlx::query_as::<_, ScheduleRow>(&sql)
        .bind(schedule_id)
        .bind(write.paused)
        .bind(write.next_run_at)
        .bind(revision)
        .bind(now)
        .bind(write.note)
        .bind(write.until)
        .bind(write.by)
        .fetch_optional(db)
        .await?
        .map(Schedule::from))
}

/// When the schedule was paused; `None` while it runs (or when it does not exist).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn paused_at(
    db: impl PgExecutor<'_>,
    schedule_id: &str,
) -> Result<Option<DateTime<Utc>>> {
    let paused_at: Option<Option<DateTime<Utc>>> =
        sqlx::query_scalar("select paused_at from schedules where schedule_id = $1")
            .bind(schedule_id)
            .fetch_optional(db)
            .await?;
    Ok(paused_at.flatten())
}

/// Schedules by id, in id order (missing ids are absent).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn get_many(db: impl PgExecutor<'_>, schedule_ids: &[String]) -> Result<Vec<Schedule>> {
    let sql =
        format!("select {COLUMNS} from schedules where schedule_id = any($1) order by schedule_id");
    Ok(sqlx::query_as::<_, ScheduleRow>(&sql)
        .bind(schedule_ids)
        .fetch_all(db)
        .await?
        .into_iter()
        .map(Schedule::from)
        .collect())
}

/// Sets `next_run_at` of schedules whose timetable changed without a write of their own
/// (a calendar they use changed), incrementing `revision` so that planners wake and a
/// concurrent registrar write of the same schedule fails its revision check. Returns how
/// many rows changed.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn retime(
    db: impl PgExecutor<'_>,
    schedule_ids: &[String],
    next_run_ats: &[Option<DateTime<Utc>>],
    now: DateTime<Utc>,
) -> Result<u64> {
    if schedule_ids.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query(
        "update schedules as s set next_run_at = v.next_run_at, planner_error = null, \
           revision = s.revision + 1, updated_at = $3 \
         from unnest($1::text[], $2::timestamptz[]) as v(schedule_id, next_run_at) \
         where s.schedule_id = v.schedule_id",
    )
    .bind(schedule_ids)
    .bind(next_run_ats)
    .bind(now)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Deletes schedules by id; returns the ids that existed. Their runs stay (history).
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn delete_many(db: impl PgExecutor<'_>, schedule_ids: &[String]) -> Result<Vec<String>> {
    if schedule_ids.is_empty() {
        return Ok(Vec::new());
    }
    Ok(sqlx::query_scalar(
        "delete from schedules where schedule_id = any($1) returning schedule_id",
    )
    .bind(schedule_ids)
    .fetch_all(db)
    .await?)
}

/// How many schedules are stored (for tests and operators).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn count(db: impl PgExecutor<'_>) -> Result<i64> {
    Ok(sqlx::query_scalar("select count(*) from schedules")
        .fetch_one(db)
        .await?)
}
