//! A run's attempts (docs/design.md §3): the next attempt after a timed-out one, the history of
//! finished attempts, one more attempt on request (`POST /runs/{key}/retry`), and dead
//! letters — their listing and the outbox the sweeper publishes to the DLQ stream.
//!
//! A retry keeps the run's key: the run becomes `RETRYING` with `fire_at` = the time of its
//! next attempt and `attempt` + 1, and the dispatcher claims it like a `PENDING` run when
//! that time comes. Until then it holds its schedule (one in flight).

use chrono::{DateTime, Utc};
use kairos_core::{Attempt, FailurePolicy, Run, RunStatus};
use sqlx::{PgConnection, PgExecutor};

use crate::rows::{AttemptRow, FailureRow, RunRow};
use crate::Result;

/// The columns a new attempt resets (the run row holds only the attempt in progress).
const NEXT_ATTEMPT: &str = "status = 'RETRYING', attempt = r.attempt + 1, \
    executor_id = null, run_id = null, published_at = null, stream_seq = null, \
    started_at = null, finished_at = null, heartbeat_at = null, released_at = null, \
    dead_lettered_at = null, dlq_published_at = null";

/// After [`crate::dispatch::time_out`] or [`never_started`], in the same transaction: each
/// run with a time gets its next attempt then; each without one is dead-lettered. Returns
/// how many of each.
///
/// # Errors
/// [`crate::Error::Database`] when a statement fails.
pub async fn settle_timed_out(
    tx: &mut PgConnection,
    runs: &[(String, Option<DateTime<Utc>>)],
    now: DateTime<Utc>,
) -> Result<(u64, u64)> {
    let (retry, dead): (Vec<_>, Vec<_>) = runs.iter().partition(|(_, at)| at.is_some());
    let keys: Vec<&str> = retry.iter().map(|(key, _)| key.as_str()).collect();
    let ats: Vec<DateTime<Utc>> = retry.iter().filter_map(|(_, at)| *at).collect();
    let retried = sqlx::query(&format!(
        "update schedule_runs r set {NEXT_ATTEMPT}, fire_at = v.at, updated_at = $3, \
           reason = format('attempt %s %s; attempt %s at %s', r.attempt, \
             case r.status when 'FAILED' then 'was never started' else 'timed out' end, \
             r.attempt + 1, to_char(v.at at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')) \
         from unnest($1::text[], $2::timestamptz[]) as v(key, at) \
         where r.idempotency_key = v.key and r.status in ('TIMED_OUT', 'FAILED')"
    ))
    .bind(&keys)
    .bind(&ats)
    .bind(now)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if retried > 0 {
        // Its next attempt may be due sooner than the dispatchers' lead (see `status::write`).
        crate::wakeups::runs_due(&mut *tx).await?;
    }
    let dead_keys: Vec<&str> = dead.iter().map(|(key, _)| key.as_str()).collect();
    let dead_lettered = sqlx::query(
        "update schedule_runs set dead_lettered_at = $2, updated_at = $2 \
         where idempotency_key = any($1) and status in ('TIMED_OUT', 'FAILED')",
    )
    .bind(&dead_keys)
    .bind(now)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    Ok((retried, dead_lettered))
}

/// An `ENQUEUED` run that no executor started within its start timeout.
#[derive(Debug, Clone, PartialEq)]
pub struct Unstarted {
    /// The run as it is.
    pub run: Run,
    /// How often its attempt was re-published.
    pub republished: i32,
    /// Its schedule's failure policy.
    pub failure: FailurePolicy,
}

/// The row [`unstarted`] reads into an [`Unstarted`].
#[derive(sqlx::FromRow)]
struct UnstartedRow {
    #[sqlx(flatten)]
    run: RunRow,
    republished: i32,
    #[sqlx(flatten)]
    failure: FailureRow,
}

impl From<UnstartedRow> for Unstarted {
    fn from(row: UnstartedRow) -> Unstarted {
        Unstarted {
            run: row.run.into(),
            republished: row.republished,
            failure: row.failure.into(),
        }
    }
}

/// Locks up to `limit` `ENQUEUED` runs published longer ago than their schedule's
/// `start_timeout_s` (`default_s` when the schedule sets none; 0 turns the check off),
/// oldest publish first. Only runs older than the smallest timeout in effect are visited
/// (index `schedules_start_timeout`), so a burst of fresh launches costs nothing here.
///
/// The status test is written `(r.status = 'ENQUEUED') is true`, exactly as the predicate
/// of `schedule_runs_enqueued`: it proves that index's predicate and not the one of
/// `schedule_runs_in_flight`, which statistics taken before a burst made the planner
/// prefer (see `migrations/20260205000000_enqueued_index.sql`).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn unstarted(
    tx: &mut PgConnection,
    now: DateTime<Utc>,
    default_s: i32,
    limit: i64,
) -> Result<Vec<Unstarted>> {
    let columns = crate::runs::run_columns_of("r");
    let sql = format!(
        "select {columns}, r.republished, coalesce(s.max_attempts, 1) as max_attempts, \
           s.retry_intervals_s, s.retry_backoff_initial_s, s.retry_backoff_multiplier, \
           s.retry_backoff_max_s, s.heartbeat_timeout_s, s.start_timeout_s \
         from schedule_runs r left join schedules s on s.schedule_id = r.schedule_id \
         where (r.status = 'ENQUEUED') is true \
           and r.published_at < $1 - make_interval(secs => ( \
             select min(t) from (select nullif($2, 0) as t union all \
               select min(start_timeout_s) from schedules where start_timeout_s > 0) as b)) \
           and coalesce(s.start_timeout_s, $2) > 0 \
           and r.published_at < $1 - make_interval(secs => coalesce(s.start_timeout_s, $2)) \
         order by r.published_at limit $3 for update of r skip locked"
    );
    let rows: Vec<UnstartedRow> = sqlx::query_as(&sql)
        .bind(now)
        .bind(default_s)
        .bind(limit)
        .fetch_all(tx)
        .await?;
    Ok(rows.into_iter().map(Unstarted::from).collect())
}

/// Records re-published runs: `(key, stream sequence)`; `published_at` is now again, so the
/// start timeout counts anew.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn republished(
    tx: &mut PgConnection,
    runs: &[(String, i64)],
    now: DateTime<Utc>,
) -> Result<()> {
    let (keys, seqs): (Vec<&str>, Vec<i64>) =
        runs.iter().map(|(key, seq)| (key.as_str(), *seq)).unzip();
    sqlx::query(
        "update schedule_runs r set published_at = $3, stream_seq = v.seq, \
           republished = r.republished + 1, updated_at = $3 \
         from unnest($1::text[], $2::int8[]) as v(key, seq) \
         where r.idempotency_key = v.key and r.status = 'ENQUEUED'",
    )
    .bind(&keys)
    .bind(&seqs)
    .bind(now)
    .execute(tx)
    .await?;
    Ok(())
}

/// Fails the attempt in progress of `keys` as never started (and records it); the caller
/// then applies the retry policy with [`settle_timed_out`].
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn never_started(
    tx: &mut PgConnection,
    keys: &[String],
    reason: &str,
    now: DateTime<Utc>,
) -> Result<()> {
    sqlx::query(
        "with failed as ( \
           update schedule_runs set status = 'FAILED', reason = $2, last_error = $2, \
             finished_at = $3, updated_at = $3 \
           where idempotency_key = any($1) and status = 'ENQUEUED' \
           returning * \
         ) \
         insert into run_attempts (idempotency_key, attempt, status, error, executor_id, \
           run_id, published_at, started_at, finished_at) \
         select idempotency_key, attempt, 'FAILED', reason, executor_id, run_id, published_at, \
           started_at, finished_at from failed \
         on conflict do nothing",
    )
    .bind(keys)
    .bind(reason)
    .bind(now)
    .execute(tx)
    .await?;
    Ok(())
}

/// The finished attempts of a run, oldest first: those `run_attempts` keeps, and a run's
/// `SUCCESS` attempt from its own row (the status intake writes no `run_attempts` row for
/// it; a row written for it earlier is read once).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn history(db: impl PgExecutor<'_>, key: &str) -> Result<Vec<Attempt>> {
    Ok(sqlx::query_as::<_, AttemptRow>(
        "select attempt, status, error, executor_id, run_id, published_at, started_at, \
           finished_at from run_attempts where idempotency_key = $1 \
         union all \
         select r.attempt, r.status, null::text, r.executor_id, r.run_id, r.published_at, \
           r.started_at, r.finished_at from schedule_runs r \
         where r.idempotency_key = $1 and r.status = 'SUCCESS' \
           and r.finished_at is not null and not exists ( \
           select 1 from run_attempts a \
           where a.idempotency_key = r.idempotency_key and a.attempt = r.attempt) \
         order by attempt",
    )
    .bind(key)
    .fetch_all(db)
    .await?
    .into_iter()
    .map(Attempt::from)
    .collect())
}

/// What [`retry_finished`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Retried {
    /// The next attempt is due now; the run as it is.
    Started(Run),
    /// This request id started an attempt before; the run as it is.
    Again(Run),
    /// The run has not finished, or it succeeded or was cancelled: nothing to retry.
    NotRetryable(Run),
    /// Another run of its exclusive schedule holds it.
    Blocked {
        /// The run.
        run: Run,
        /// The run holding the schedule.
        holder: String,
    },
    /// No run has this key.
    NotFound,
}

/// One more attempt of a finished (`FAILED` or `TIMED_OUT`) run, due now, unless
/// `request_id` started one before. A dead letter stops being one.
///
/// # Errors
/// [`crate::Error::Database`] when a statement fails.
pub async fn retry_finished(
    tx: &mut PgConnection,
    key: &str,
    request_id: &str,
    now: DateTime<Utc>,
) -> Result<Retried> {
    let Some(run) = lock(tx, key).await? else {
        return Ok(Retried::NotFound);
    };
    let seen: Option<i32> = sqlx::query_scalar(
        "select attempt from run_retry_requests where idempotency_key = $1 and request_id = $2",
    )
    .bind(key)
    .bind(request_id)
    .fetch_optional(&mut *tx)
    .await?;
    if seen.is_some() {
        return Ok(Retried::Again(run));
    }
    if !matches!(run.status, RunStatus::Failed | RunStatus::TimedOut) {
        return Ok(Retried::NotRetryable(run));
    }
    let holder: Option<String> = sqlx::query_scalar(&format!(
        "select b.idempotency_key from schedule_runs b \
         join schedules s on s.schedule_id = b.schedule_id \
         where b.schedule_id = $1 and b.idempotency_key <> $2 \
           and s.overlap_policy <> 'allow' \
           and b.status in {} limit 1",
        *crate::groups::HOLDING
    ))
    .bind(&run.schedule_id)
    .bind(key)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(holder) = holder {
        return Ok(Retried::Blocked { run, holder });
    }
    sqlx::query(&format!(
        "update schedule_runs r set {NEXT_ATTEMPT}, fire_at = $2, updated_at = $2, \
           reason = format('attempt %s requested', r.attempt + 1), \
           exclusive = r.source <> 'api' and coalesce((select s.overlap_policy <> 'allow' \
             from schedules s where s.schedule_id = r.schedule_id), false) \
         where r.idempotency_key = $1"
    ))
    .bind(key)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "insert into run_retry_requests (idempotency_key, request_id, attempt, created_at) \
         values ($1, $2, $3, $4)",
    )
    .bind(key)
    .bind(request_id)
    .bind(run.attempt + 1)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    crate::wakeups::runs_due(&mut *tx).await?;
    let run = crate::runs::get(&mut *tx, key)
        .await?
        .expect("the run is locked by this transaction");
    Ok(Retried::Started(run))
}

async fn lock(tx: &mut PgConnection, key: &str) -> Result<Option<Run>> {
    let sql = format!(
        "select {} from schedule_runs where idempotency_key = $1 for update",
        crate::runs::RUN_COLUMNS
    );
    let run: Option<RunRow> = sqlx::query_as(&sql).bind(key).fetch_optional(tx).await?;
    Ok(run.map(Run::from))
}

/// Filters of [`dead_letters`].
pub type DeadLetterFilter = crate::marked_runs::MarkedFilter;

/// Dead-lettered runs, newest first (keyset pagination on the partial index).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn dead_letters(db: impl PgExecutor<'_>, filter: &DeadLetterFilter) -> Result<Vec<Run>> {
    crate::marked_runs::list(db, crate::marked_runs::Mark::DeadLettered, filter).await
}

/// Locks up to `limit` dead letters not yet published to the DLQ stream (skipping those
/// another sweep holds), oldest first.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn unsent_dead_letters(tx: &mut PgConnection, limit: i64) -> Result<Vec<Run>> {
    let sql = format!(
        "select {} from schedule_runs where dead_lettered_at is not null \
           and dlq_published_at is null \
         order by dead_lettered_at, idempotency_key limit $1 for update skip locked",
        crate::runs::RUN_COLUMNS
    );
    let runs: Vec<RunRow> = sqlx::query_as(&sql).bind(limit).fetch_all(tx).await?;
    Ok(runs.into_iter().map(Run::from).collect())
}

/// Marks dead letters as published to the DLQ stream.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn mark_sent(tx: &mut PgConnection, keys: &[String], now: DateTime<Utc>) -> Result<()> {
    sqlx::query("update schedule_runs set dlq_published_at = $2 where idempotency_key = any($1)")
        .bind(keys)
        .bind(now)
        .execute(tx)
        .await?;
    Ok(())
}
