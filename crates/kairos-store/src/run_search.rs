//! Runs across schedules for `GET /runs`: by status, schedule, workflow, source and a range
//! of ticks, newest tick first, paged by keyset on `(run_at, idempotency_key)`.

use chrono::{DateTime, Utc};
use kairos_core::{Run, RunSource, RunStatus};
use sqlx::PgExecutor;

use crate::rows::RunRow;
use crate::Result;

/// Filters of [`search`]; each one given narrows the list.
#[derive(Debug, Clone, Default)]
pub struct RunSearch {
    /// Only runs in one of these statuses (none: any status).
    pub statuses: Vec<RunStatus>,
    /// Only this schedule's runs.
    pub schedule_id: Option<String>,
    /// Only this workflow's runs.
    pub workflow_id: Option<String>,
    /// Only runs created this way.
    pub source: Option<RunSource>,
    /// Only ticks at or after this.
    pub from: Option<DateTime<Utc>>,
    /// Only ticks at or before this.
    pub to: Option<DateTime<Utc>>,
    /// Only runs before this one (the cursor: its tick, then key).
    pub before: Option<(DateTime<Utc>, String)>,
    /// Page size.
    pub limit: i64,
}

/// The runs that pass `search`, newest tick first.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn search(db: impl PgExecutor<'_>, search: &RunSearch) -> Result<Vec<Run>> {
    let statuses: Option<Vec<&str>> = (!search.statuses.is_empty()).then(|| {
        search
            .statuses
            .iter()
            .map(|status| status.as_str())
            .collect()
    });
    let (before_at, before_key) = search.before.clone().unzip();
    let sql = format!(
        "select {columns} from schedule_runs \
         where ($1::text[] is null or status = any($1)) \
           and ($2::text is null or schedule_id = $2) and ($3::text is null or workflow_id = $3) \
           and ($4::text is null or source = $4) \
           and ($5::timestamptz is null or run_at >= $5) \
           and ($6::timestamptz is null or run_at <= $6) \
           and ($7::timestamptz is null or (run_at, idempotency_key) < ($7, $8)) \
         order by run_at desc, idempotency_key desc limit $9",
        columns = crate::runs::RUN_COLUMNS,
    );
    Ok(sqlx::query_as::<_, RunRow>(&sql)
        .bind(statuses)
        .bind(&search.schedule_id)
        .bind(&search.workflow_id)
        .bind(search.source.map(RunSource::as_str))
        .bind(search.from)
        .bind(search.to)
        .bind(before_at)
        .bind(before_key)
        .bind(search.limit)
        .fetch_all(db)
        .await?
        .into_iter()
        .map(Run::from)
        .collect())
}
