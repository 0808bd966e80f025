//! Runs listed by a mark they carry (dead-lettered, late), newest mark first, with keyset
//! pagination on the mark's partial index: one statement for every such listing.

use chrono::{DateTime, Utc};
use kairos_core::Run;
use sqlx::PgExecutor;

use crate::rows::RunRow;
use crate::Result;

/// Filters of a listing of marked runs.
#[derive(Debug, Clone, Default)]
pub struct MarkedFilter {
    /// Only this schedule's.
    pub schedule_id: Option<String>,
    /// Only this workflow's.
    pub workflow_id: Option<String>,
    /// Only those marked before this one (the cursor: the mark's time, then key).
    pub before: Option<(DateTime<Utc>, String)>,
    /// Page size.
    pub limit: i64,
}

/// A mark a run carries, as a time column of `schedule_runs` with a partial index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// `dead_lettered_at`: its last attempt failed.
    DeadLettered,
    /// `late_at`: not `SUCCESS` by its deadline.
    Late,
}

impl Mark {
    fn column(self) -> &'static str {
        match self {
            Mark::DeadLettered => "dead_lettered_at",
            Mark::Late => "late_at",
        }
    }
}

/// The runs carrying `mark` that pass `filter`, newest mark first.
pub(crate) async fn list(
    db: impl PgExecutor<'_>,
    mark: Mark,
    filter: &MarkedFilter,
) -> Result<Vec<Run>> {
    let (before_at, before_key) = filter.before.clone().unzip();
    let sql = format!(
        "select {columns} from schedule_runs where {at} is not null \
           and ($1::text is null or schedule_id = $1) and ($2::text is null or workflow_id = $2) \
           and ($3::timestamptz is null or ({at}, idempotency_key) < ($3, $4)) \
         order by {at} desc, idempotency_key desc limit $5",
        columns = crate::runs::RUN_COLUMNS,
        at = mark.column(),
    );
    Ok(sqlx::query_as::<_, RunRow>(&sql)
        .bind(&filter.schedule_id)
        .bind(&filter.workflow_id)
        .bind(before_at)
        .bind(before_key)
        .bind(filter.limit)
        .fetch_all(db)
        .await?
        .into_iter()
        .map(Run::from)
        .collect())
}
