//! Reads for the operator page (`/ui`): the newest runs across schedules, the runs in
//! flight, and the statistics of a page of schedules in one statement. Each query is served
//! by an index: `schedule_runs_schedule` with a schedule, `schedule_runs_recent` otherwise
//! (with a workflow filter it skips other workflows' runs: no second index is written on
//! every status change for an admin listing), and the partial `schedule_runs_in_flight` for
//! runs in flight.

use chrono::{DateTime, Utc};
use kairos_core::RunStatus;
use sqlx::PgExecutor;

use crate::runs::{Run, RUN_COLUMNS};
use crate::stats::{RunRef, ScheduleStats};
use crate::Result;

/// Filters of [`recent_runs`] and [`in_flight`]; `None` means "any".
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    /// Only runs in this status (ignored by [`in_flight`]).
    pub status: Option<RunStatus>,
    /// Only this schedule's runs.
    pub schedule_id: Option<String>,
    /// Only this workflow's runs.
    pub workflow_id: Option<String>,
    /// Page size.
    pub limit: i64,
}

/// The conditions of `filter` as SQL over numbered parameters, and the values to bind.
/// Only the filters given are written, so the planner sees plain equalities and picks the
/// matching index (a generic plan of `$1 is null or ...` would not).
fn conditions(filter: &RunFilter, with_status: bool) -> (String, Vec<String>) {
    let mut sql = Vec::new();
    let mut binds = Vec::new();
    let pairs = [
        ("schedule_id", filter.schedule_id.clone()),
        ("workflow_id", filter.workflow_id.clone()),
        (
            "status",
            filter
                .status
                .filter(|_| with_status)
                .map(|s| s.as_str().to_string()),
        ),
    ];
    for (column, value) in pairs {
        if let Some(value) = value {
            binds.push(value);
            sql.push(format!("{column} = ${}", binds.len()));
        }
    }
    (sql.join(" and "), binds)
}

/// The newest runs matching `filter`, newest tick first.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn recent_runs(db: impl PgExecutor<'_>, filter: &RunFilter) -> Result<Vec<Run>> {
    let (mut conds, binds) = conditions(filter, true);
    if conds.is_empty() {
        conds = "true".to_string();
    }
    let sql = format!(
        "select {RUN_COLUMNS} from schedule_runs where {conds} \
         order by run_at desc, idempotency_key limit ${}",
        binds.len() + 1
    );
    let mut query = sqlx::query_as(&sql);
    for value in binds {
        query = query.bind(value);
    }
    Ok(query.bind(filter.limit).fetch_all(db).await?)
}

/// Runs in flight (`ENQUEUED`, `STARTED`, `RETRYING`) matching `filter`, the longest in
/// flight first.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn in_flight(db: impl PgExecutor<'_>, filter: &RunFilter) -> Result<Vec<Run>> {
    let (conds, binds) = conditions(filter, false);
    let extra = if conds.is_empty() {
        String::new()
    } else {
        format!("and {conds}")
    };
    let sql = format!(
        "select {RUN_COLUMNS} from schedule_runs \
         where status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING') {extra} \
         order by coalesce(started_at, published_at, fire_at), idempotency_key limit ${}",
        binds.len() + 1
    );
    let mut query = sqlx::query_as(&sql);
    for value in binds {
        query = query.bind(value);
    }
    Ok(query.bind(filter.limit).fetch_all(db).await?)
}

/// The statistics of each of `schedule_ids` (in that order) over its newest `window` runs,
/// in one statement: per schedule the same reads as [`crate::stats::for_schedule`] (its row
/// by primary key, an index range scan of `schedule_runs_schedule` that stops after `window`
/// entries), so a listing page costs one round trip, not one per schedule.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn stats_for_many(
    db: impl PgExecutor<'_>,
    schedule_ids: &[String],
    window: i64,
) -> Result<Vec<ScheduleStats>> {
    let launched = crate::stats::LAUNCHED;
    let sql = format!(
        "select coalesce(s.missed_ticks, 0) as missed_ticks, s.planner_error, \
           st.runs_examined, st.skipped_ticks, \
           st.fire_run_at, st.fire_status, st.fire_reason, st.fire_error, \
           st.miss_run_at, st.miss_status, st.miss_reason, st.miss_error \
         from unnest($1::text[]) with ordinality k(schedule_id, ord) \
         left join schedules s on s.schedule_id = k.schedule_id \
         left join lateral ( \
           with recent as materialized ( \
             select run_at, status, reason, last_error, updated_at, {launched} as launched \
             from schedule_runs r where r.schedule_id = k.schedule_id \
             order by run_at desc limit $2 \
           ), fire as ( \
             select run_at, status, reason, last_error from recent where launched \
             order by run_at desc, updated_at desc limit 1 \
           ), miss as ( \
             select run_at, status, reason, last_error from recent \
             where not launched and status in ('SKIPPED', 'CANCELLED', 'FAILED') \
             order by run_at desc, updated_at desc limit 1 \
           ) \
           select (select count(*) from recent) as runs_examined, \
             (select count(*) from recent where status = 'SKIPPED') as skipped_ticks, \
             fire.run_at as fire_run_at, fire.status as fire_status, \
             fire.reason as fire_reason, fire.last_error as fire_error, \
             miss.run_at as miss_run_at, miss.status as miss_status, \
             miss.reason as miss_reason, miss.last_error as miss_error \
           from (select 1) one left join fire on true left join miss on true \
         ) st on true \
         order by k.ord"
    );
    let rows: Vec<StatsRow> = sqlx::query_as(&sql)
        .bind(schedule_ids)
        .bind(window)
        .fetch_all(db)
        .await?;
    Ok(rows.into_iter().map(StatsRow::into_stats).collect())
}

/// One row of [`stats_for_many`].
#[derive(sqlx::FromRow)]
struct StatsRow {
    missed_ticks: i64,
    planner_error: Option<String>,
    runs_examined: i64,
    skipped_ticks: i64,
    fire_run_at: Option<DateTime<Utc>>,
    fire_status: Option<String>,
    fire_reason: Option<String>,
    fire_error: Option<String>,
    miss_run_at: Option<DateTime<Utc>>,
    miss_status: Option<String>,
    miss_reason: Option<String>,
    miss_error: Option<String>,
}

impl StatsRow {
    fn into_stats(self) -> ScheduleStats {
        let run = |run_at: Option<DateTime<Utc>>,
                   status: Option<String>,
                   reason: Option<String>,
                   last_error: Option<String>| {
            Some(RunRef {
                run_at: run_at?,
                // The column's CHECK admits only the enum's names.
                status: status?.parse().ok()?,
                reason,
                last_error,
            })
        };
        ScheduleStats {
            last_fire: run(
                self.fire_run_at,
                self.fire_status,
                self.fire_reason,
                self.fire_error,
            ),
            last_not_launched: run(
                self.miss_run_at,
                self.miss_status,
                self.miss_reason,
                self.miss_error,
            ),
            missed_ticks: self.missed_ticks,
            skipped_ticks: self.skipped_ticks,
            runs_examined: self.runs_examined,
            planner_error: self.planner_error,
        }
    }
}
