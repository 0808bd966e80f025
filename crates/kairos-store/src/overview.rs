//! Reads for the operator page (`/ui`): the newest runs across schedules and the runs in
//! flight (a page of schedules' statistics is `crate::stats::for_schedules`). Each query is served
//! by an index: `schedule_runs_schedule` with a schedule, `schedule_runs_recent` otherwise
//! (with a workflow filter it skips other workflows' runs: no second index is written on
//! every status change for an admin listing), and the partial `schedule_runs_in_flight` for
//! runs in flight. The last day across all schedules ([`last_day`]) reads `schedule_runs_recent`
//! over a `run_at` range, so at most the two newest day partitions.

use chrono::{DateTime, Utc};
use kairos_core::{Run, RunFilter};
use sqlx::PgExecutor;

use crate::rows::RunRow;
use crate::runs::RUN_COLUMNS;
use crate::Result;

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
    let mut query = sqlx::query_as::<_, RunRow>(&sql);
    for value in binds {
        query = query.bind(value);
    }
    let runs = query.bind(filter.limit).fetch_all(db).await?;
    Ok(runs.into_iter().map(Run::from).collect())
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
         where status in {holding} {extra} \
         order by coalesce(started_at, published_at, fire_at), idempotency_key limit ${}",
        binds.len() + 1,
        holding = *crate::groups::HOLDING
    );
    let mut query = sqlx::query_as::<_, RunRow>(&sql);
    for value in binds {
        query = query.bind(value);
    }
    let runs = query.bind(filter.limit).fetch_all(db).await?;
    Ok(runs.into_iter().map(Run::from).collect())
}

/// One hour of the last day across all schedules: what the runs planned in it became, and
/// how late the published ones were.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HourTotals {
    /// Which hour: 0 holds `run_at` in (now − 1 h, now], 23 holds (now − 24 h, now − 23 h].
    pub hours_ago: i32,
    /// `SUCCESS`.
    pub success: i64,
    /// `FAILED` or `TIMED_OUT`.
    pub failed: i64,
    /// `SKIPPED`.
    pub skipped: i64,
    /// `CANCELLED`.
    pub cancelled: i64,
    /// Any other status: pending or in flight.
    pub other: i64,
    /// How many planned ticks' first attempts were published (those the drift is over).
    pub published: i64,
    /// The median fire drift in milliseconds: `published_at − run_at` of the planned ticks'
    /// first attempts, the meaning of `kairos_fire_drift_seconds` (none: `None`).
    pub drift_p50_ms: Option<f64>,
    /// The largest fire drift in milliseconds.
    pub drift_max_ms: Option<f64>,
}

/// The row [`last_day`] reads into an [`HourTotals`].
#[derive(sqlx::FromRow)]
struct HourTotalsRow {
    hours_ago: i32,
    success: i64,
    failed: i64,
    skipped: i64,
    cancelled: i64,
    other: i64,
    published: i64,
    drift_p50_ms: Option<f64>,
    drift_max_ms: Option<f64>,
}

impl From<HourTotalsRow> for HourTotals {
    fn from(row: HourTotalsRow) -> HourTotals {
        HourTotals {
            hours_ago: row.hours_ago,
            success: row.success,
            failed: row.failed,
            skipped: row.skipped,
            cancelled: row.cancelled,
            other: row.other,
            published: row.published,
            drift_p50_ms: row.drift_p50_ms,
            drift_max_ms: row.drift_max_ms,
        }
    }
}

/// Runs with `run_at` in (`now` − 24 h, `now`], grouped by hour (only hours holding a run),
/// newest hour first. Drift is over the published first attempts of planned ticks only, as
/// the `kairos_fire_drift_seconds` histogram is (manual, backfill and chained runs and
/// retries fire when asked, not on a tick); a negative drift counts as 0.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn last_day(db: impl PgExecutor<'_>, now: DateTime<Utc>) -> Result<Vec<HourTotals>> {
    let rows = sqlx::query_as::<_, HourTotalsRow>(
        "with day as ( \
             select status, \
                    floor(extract(epoch from ($1::timestamptz - run_at)) / 3600)::int as hours_ago, \
                    case when published_at is not null and source = 'schedule' and attempt = 1 \
                        then greatest(0, extract(epoch from (published_at - run_at)) * 1000)::float8 \
                        end as drift_ms \
             from schedule_runs \
             where run_at > $1::timestamptz - interval '24 hours' and run_at <= $1::timestamptz) \
         select hours_ago, \
                count(*) filter (where status = 'SUCCESS') as success, \
                count(*) filter (where status in ('FAILED', 'TIMED_OUT')) as failed, \
                count(*) filter (where status = 'SKIPPED') as skipped, \
                count(*) filter (where status = 'CANCELLED') as cancelled, \
                count(*) filter (where status not in \
                    ('SUCCESS', 'FAILED', 'TIMED_OUT', 'SKIPPED', 'CANCELLED')) as other, \
                count(drift_ms) as published, \
                percentile_cont(0.5) within group (order by drift_ms) as drift_p50_ms, \
                max(drift_ms) as drift_max_ms \
         from day group by hours_ago order by hours_ago",
    )
    .bind(now)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(HourTotals::from).collect())
}
