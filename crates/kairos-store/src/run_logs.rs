//! The logs executors report per attempt (`run_logs`): a link to the attempt's logs and the
//! tail of its output. Recorded with a batch of status reports, in its transaction; read
//! with the run; deleted with the run by retention.

use chrono::{DateTime, Utc};
use kairos_core::AttemptLog;
use sqlx::{PgConnection, PgExecutor};

use crate::Result;

/// What one report said of its attempt's logs (either may be absent, not both).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportedLog {
    /// The run.
    pub idempotency_key: String,
    /// The attempt the report was about.
    pub attempt: i32,
    /// The link, when the report had one.
    pub log_url: Option<String>,
    /// The output's tail, when the report had one (already cut by `kairos_core::output_tail`).
    pub output: Option<String>,
}

/// Records `logs` at `now` in one statement: a field a report left out keeps what an
/// earlier report said. `logs` holds at most one entry per attempt (the caller merges a
/// batch's reports about one attempt, newest last).
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn record(db: &mut PgConnection, logs: &[ReportedLog], now: DateTime<Utc>) -> Result<()> {
    if logs.is_empty() {
        return Ok(());
    }
    let keys: Vec<&str> = logs.iter().map(|l| l.idempotency_key.as_str()).collect();
    let attempts: Vec<i32> = logs.iter().map(|l| l.attempt).collect();
    let urls: Vec<Option<&str>> = logs.iter().map(|l| l.log_url.as_deref()).collect();
    let outputs: Vec<Option<&str>> = logs.iter().map(|l| l.output.as_deref()).collect();
    sqlx::query(
        "insert into run_logs (idempotency_key, attempt, log_url, output, updated_at) \
         select u.key, u.attempt, u.log_url, u.output, $5 \
         from unnest($1::text[], $2::int[], $3::text[], $4::text[]) \
           as u(key, attempt, log_url, output) \
         on conflict (idempotency_key, attempt) do update set \
           log_url = coalesce(excluded.log_url, run_logs.log_url), \
           output = coalesce(excluded.output, run_logs.output), \
           updated_at = excluded.updated_at",
    )
    .bind(keys)
    .bind(attempts)
    .bind(urls)
    .bind(outputs)
    .bind(now)
    .execute(db)
    .await?;
    Ok(())
}

/// The logs of run `key`, one per attempt that reported any, oldest attempt first.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn of_run(db: impl PgExecutor<'_>, key: &str) -> Result<Vec<AttemptLog>> {
    let rows: Vec<(i32, Option<String>, Option<String>, DateTime<Utc>)> = sqlx::query_as(
        "select attempt, log_url, output, updated_at from run_logs \
         where idempotency_key = $1 order by attempt",
    )
    .bind(key)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(attempt, log_url, output, updated_at)| AttemptLog {
            attempt,
            log_url,
            output,
            updated_at,
        })
        .collect())
}
