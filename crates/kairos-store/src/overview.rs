//! Reads for the operator page (`/ui`): the newest runs across schedules and the runs in
//! flight (a page of schedules' statistics is `crate::stats::for_schedules`). Each query is served
//! by an index: `schedule_runs_schedule` with a schedule, `schedule_runs_recent` otherwise
//! (with a workflow filter it skips other workflows' runs: no second index is written on
//! every status change for an admin listing), and the partial `schedule_runs_in_flight` for
//! runs in flight.

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
