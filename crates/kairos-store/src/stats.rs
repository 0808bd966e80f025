//! Per-schedule statistics for `GET /schedules/{id}`: the last fire and its status,
//! the missed-tick counter the planner keeps on `schedules`, skipped ticks among the newest
//! runs, and why the last tick that did not launch did not.
//!
//! One statement, cheap whatever the history: it reads the schedule's row by primary key and
//! at most `window` of its newest runs through `schedule_runs_schedule`
//! (`(schedule_id, run_at desc)`, an index range scan that stops after `window` entries). Every
//! run-derived answer is therefore about that window: a schedule whose newest `window` runs
//! were all skipped reports no last fire, and says so through [`ScheduleStats::runs_examined`].

use chrono::{DateTime, Utc};
use kairos_core::{RunRef, ScheduleStats};
use sqlx::PgExecutor;

use crate::Result;

/// How many of a schedule's newest runs the statistics look at by default.
pub const DEFAULT_WINDOW: i64 = 1000;

/// A run counts as launched once it was published (`published_at`), is or was in flight,
/// or an executor reported on it (the dispatcher may have died between the PubAck and
/// recording it: the run is `STARTED` or finished with no `published_at`).
const LAUNCHED: &str = "(published_at is not null or started_at is not null \
    or executor_id is not null or status in ('ENQUEUED', 'STARTED', 'SUCCESS', 'TIMED_OUT'))";

/// The statistics of `schedule_id` over its newest `window` runs. A deleted schedule still
/// has run statistics (history outlives it) with `missed_ticks` 0.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn for_schedule(
    db: impl PgExecutor<'_>,
    schedule_id: &str,
    window: i64,
) -> Result<ScheduleStats> {
    let ids = [schedule_id.to_string()];
    let mut one = for_schedules(db, &ids, window).await?;
    Ok(one
        .pop()
        .expect("one row per id asked for (unnest, left joins)"))
}

/// The statistics of each of `schedule_ids` (in that order) over its newest `window` runs,
/// in one statement: per schedule its row by primary key and an index range scan of
/// `schedule_runs_schedule` that stops after `window` entries, so a listing page costs one
/// round trip, not one per schedule.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn for_schedules(
    db: impl PgExecutor<'_>,
    schedule_ids: &[String],
    window: i64,
) -> Result<Vec<ScheduleStats>> {
    let sql = format!(
        "select coalesce(s.missed_ticks, 0) as missed_ticks, s.planner_error, \
           st.runs_examined, st.skipped_ticks, \
           st.fire_run_at, st.fire_status, st.fire_reason, st.fire_error, \
           st.miss_run_at, st.miss_status, st.miss_reason, st.miss_error \
         from unnest($1::text[]) with ordinality k(schedule_id, ord) \
         left join schedules s on s.schedule_id = k.schedule_id \
         left join lateral ( \
           with recent as materialized ( \
             select run_at, status, reason, last_error, updated_at, {LAUNCHED} as launched \
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

/// One row of [`for_schedules`].
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
