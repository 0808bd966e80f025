//! Statements of the operator's run requests (DESIGN.md §4): trigger-now reads back the run
//! it wrote or found. Backfill writes with [`crate::planning::insert_runs`] (same keys as
//! the planner, so a tick is never written twice).

use sqlx::PgExecutor;

use crate::runs::Run;
use crate::Result;

/// The columns of [`Run`], in order.
const RUN_COLUMNS: &str = "idempotency_key, schedule_id, run_at, fire_at, status, source, \
    workflow_id, version, user_id, run_id, attempts, reason, last_error, published_at, \
    stream_seq, started_at, finished_at, executor_id, created_at, updated_at";

/// One run by its idempotency key.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn run_by_key(db: impl PgExecutor<'_>, idempotency_key: &str) -> Result<Option<Run>> {
    let sql = format!("select {RUN_COLUMNS} from schedule_runs where idempotency_key = $1");
    Ok(sqlx::query_as(&sql)
        .bind(idempotency_key)
        .fetch_optional(db)
        .await?)
}
