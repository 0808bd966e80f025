//! A run's attempts as operators see and steer them: one run with the history of its
//! attempts and their logs (`GET /runs/{key}`), one more attempt of a finished run (`POST
//! /runs/{key}/retry`, idempotent per request id), the dead letters (`GET
//! /dead-letters`) and the late runs (`GET /runs?late=true`).

use chrono::{DateTime, Utc};
use kairos_core::{
    Attempt, AttemptLog, ChangeKind, FieldChange, FieldValue, HistoryEntry, HistoryFilter, Run,
    Subject,
};
use kairos_store::attempts::{self, DeadLetterFilter, Retried};
use kairos_store::Tx;
use kairos_store::{run_logs, runs};

use crate::checks::{check_filter_ids, check_limit};
use crate::cursor::{self, RunPage};
use crate::error::{Error, Result};
use crate::Registrar;

/// One run with its attempts.
#[derive(Debug, Clone, PartialEq)]
pub struct RunView {
    /// The run (its attempt in progress).
    pub run: Run,
    /// Its finished attempts, oldest first.
    pub history: Vec<Attempt>,
    /// Attempts its schedule allows (1 when the schedule is gone).
    pub max_attempts: i32,
    /// The logs its executors reported, one per attempt that reported any, oldest first.
    pub logs: Vec<AttemptLog>,
    /// What people and kairos did to it (retries, cancels), newest first, at most
    /// [`RUN_CHANGES_MAX`].
    pub changes: Vec<HistoryEntry>,
}

/// The most changes of one run [`Registrar::run`] reads.
pub const RUN_CHANGES_MAX: i64 = 100;

/// Filters of [`Registrar::dead_letters`] and [`Registrar::late_runs`], as the caller gives
/// them.
#[derive(Debug, Clone, Default)]
pub struct DeadLetterQuery {
    /// Only this schedule's.
    pub schedule_id: Option<String>,
    /// Only this workflow's.
    pub workflow_id: Option<String>,
    /// The previous page's `next_cursor`.
    pub cursor: Option<String>,
    /// Page size, 1 to [`crate::LIST_LIMIT_MAX`].
    pub limit: i64,
}

impl Registrar {
    /// The run `key` with its attempts.
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`Error::Store`].
    pub async fn run(&self, key: &str) -> Result<RunView> {
        let mut tx = Tx::begin(&self.pool).await?;
        let run = runs::get(&mut *tx, key)
            .await?
            .ok_or_else(|| unknown(key))?;
        let history = attempts::history(&mut *tx, key).await?;
        let logs = run_logs::of_run(&mut *tx, key).await?;
        let filter = HistoryFilter {
            schedule_id: Some(run.schedule_id.clone()),
            run_key: Some(key.to_string()),
            limit: RUN_CHANGES_MAX,
            ..HistoryFilter::default()
        };
        let changes = kairos_store::history::list(&mut *tx, &filter).await?;
        let max_attempts = kairos_store::schedules::get(&mut *tx, &run.schedule_id)
            .await?
            .map_or(1, |schedule| schedule.failure.max_attempts);
        tx.commit().await?;
        Ok(RunView {
            run,
            history,
            max_attempts,
            logs,
            changes,
        })
    }

    /// One more attempt of the finished (`FAILED` or `TIMED_OUT`) run `key`, due now; the
    /// same `request_id` again answers the run without a new attempt. Returns the run and
    /// whether this call started the attempt.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad request id; [`Error::NotFound`]; [`Error::Conflict`]
    /// when the run has not finished, succeeded, was cancelled, or another run holds its
    /// exclusive schedule; [`Error::Store`].
    pub async fn retry(&self, key: &str, request_id: &str) -> Result<(Run, bool)> {
        kairos_core::validate_id("request_id", request_id)
            .map_err(|err| Error::invalid("request_id", err.to_string()))?;
        let mut tx = Tx::begin(&self.pool).await?;
        let now = self.now(&mut tx).await?;
        let before = runs::get(&mut *tx, key).await?;
        let retried = attempts::retry_finished(&mut tx, key, request_id, now).await?;
        if let (Retried::Started(run), Some(before)) = (&retried, &before) {
            let subject = Subject::run(key, &run.schedule_id, &run.workflow_id);
            let mut fields = vec![
                FieldChange::new("status", before.status.as_str(), run.status.as_str()),
                FieldChange::new("attempt", before.attempt, run.attempt),
            ];
            // The dead letter the retry takes back is kept here: the run row forgets it.
            if let Some(at) = before.dead_lettered_at {
                fields.push(FieldChange::new("dead_lettered_at", at, FieldValue::Null));
            }
            let change = self.change(subject, ChangeKind::Retry, fields);
            crate::history::record(&mut tx, &[change], now).await?;
        }
        tx.commit().await?;
        match retried {
            Retried::Started(run) => Ok((run, true)),
            Retried::Again(run) => Ok((run, false)),
            Retried::NotRetryable(run) => Err(Error::Conflict {
                detail: format!(
                    "run {key} is {}: only a FAILED or TIMED_OUT run can be retried",
                    run.status
                ),
            }),
            Retried::Blocked { run, holder } => Err(Error::Conflict {
                detail: format!(
                    "run {holder} holds schedule {:?}, which allows one run at a time",
                    run.schedule_id
                ),
            }),
            Retried::NotFound => Err(unknown(key)),
        }
    }

    /// Dead-lettered runs, newest first.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad limit or cursor; [`Error::Store`].
    pub async fn dead_letters(&self, query: &DeadLetterQuery) -> Result<RunPage> {
        let before = check_listing(query)?;
        let filter = DeadLetterFilter {
            schedule_id: query.schedule_id.clone(),
            workflow_id: query.workflow_id.clone(),
            before,
            limit: query.limit + 1,
        };
        let runs = attempts::dead_letters(&self.pool, &filter).await?;
        Ok(RunPage::of(runs, query.limit, |run| run.dead_lettered_at))
    }
}

/// Checks a listing's limit and ids, and reads its cursor.
fn check_listing(query: &DeadLetterQuery) -> Result<Option<(DateTime<Utc>, String)>> {
    check_limit(query.limit)?;
    check_filter_ids([
        ("schedule_id", &query.schedule_id),
        ("workflow_id", &query.workflow_id),
    ])?;
    query.cursor.as_deref().map(cursor::parse).transpose()
}

impl Registrar {
    /// Late runs (not `SUCCESS` by their deadline), newest mark first; the query's filters
    /// and cursor are those of [`Registrar::dead_letters`].
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad limit, id or cursor; [`Error::Store`].
    pub async fn late_runs(&self, query: &DeadLetterQuery) -> Result<RunPage> {
        let before = check_listing(query)?;
        let filter = kairos_store::deadlines::LateFilter {
            schedule_id: query.schedule_id.clone(),
            workflow_id: query.workflow_id.clone(),
            before,
            limit: query.limit + 1,
        };
        let runs = kairos_store::deadlines::late_runs(&self.pool, &filter).await?;
        Ok(RunPage::of(runs, query.limit, |run| run.late_at))
    }
}

fn unknown(key: &str) -> Error {
    Error::NotFound {
        what: format!("run {key:?}"),
    }
}
