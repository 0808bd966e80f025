//! Operator cancel of a run (`POST /runs/{key}/cancel`, and overlap `cancel_other`).
//!
//! One statement decides and moves the run under its row lock, so concurrent cancels make
//! one transition and a cancel racing a final report ends in whichever was recorded first:
//! - `PENDING`, `QUEUED` or `RETRYING` (its current attempt is not published) →
//!   `CANCELLED` at once; nothing is published and nothing is retried.
//! - `ENQUEUED` or `STARTED` → `CANCELLING` with `cancel_requested_at`; the cancel message
//!   is an outbox entry (`cancel_sent_at` NULL until the stream acknowledged it), so a
//!   cancel asked for while NATS is down goes out when it is back. The sweeps find these
//!   runs in `run_cancels`, which a trigger keeps: one row per `CANCELLING` run.
//! - `CANCELLING` or a final status: unchanged; the caller gets the run as it is.
//!
//! A `CANCELLING` run still holds its exclusive schedule; it ends when the executor reports
//! (`CANCELLED`, or a final status it reached first) or, with no report within the cancel
//! timeout, by [`time_out`].

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use kairos_core::{Run, RunStatus};

use sqlx::PgConnection;

use crate::Result;

/// What a cancel request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancel {
    /// The run was not published: it is `CANCELLED` now.
    Cancelled(Run),
    /// The run is published: it is `CANCELLING` now and the executor is to be told.
    Cancelling(Run),
    /// A cancel was already asked for; the run is still `CANCELLING`.
    AlreadyCancelling(Run),
    /// The run had already reached a final status; nothing changed.
    Finished(Run),
    /// No run has this key.
    NotFound,
}

impl Cancel {
    /// Its name, as the API answers it: `cancelled`, `cancelling`, `already_cancelling`,
    /// `already_finished` or `not_found`.
    pub fn kind(&self) -> &'static str {
        match self {
            Cancel::Cancelled(_) => "cancelled",
            Cancel::Cancelling(_) => "cancelling",
            Cancel::AlreadyCancelling(_) => "already_cancelling",
            Cancel::Finished(_) => "already_finished",
            Cancel::NotFound => "not_found",
        }
    }

    /// The run as it is now, unless none has the key.
    pub fn run(&self) -> Option<&Run> {
        match self {
            Cancel::Cancelled(run)
            | Cancel::Cancelling(run)
            | Cancel::AlreadyCancelling(run)
            | Cancel::Finished(run) => Some(run),
            Cancel::NotFound => None,
        }
    }
}

/// Cancels the run `key` (see the module text). `reason` is written on the run; "now" is
/// the database's clock (`pinned` in tests).
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn request(
    db: &mut PgConnection,
    key: &str,
    reason: &str,
    pinned: Option<DateTime<Utc>>,
) -> Result<Cancel> {
    /// The run's status before the cancel.
    #[derive(sqlx::FromRow)]
    struct Before {
        #[sqlx(try_from = "String")]
        status: RunStatus,
    }
    let before: Option<Before> = sqlx::query_as(&REQUEST)
        .bind(key)
        .bind(reason)
        .bind(pinned)
        .bind(crate::wakeups::RUNS_CHANNEL)
        .fetch_optional(&mut *db)
        .await?;
    let Some(Before { status: before }) = before else {
        return Ok(Cancel::NotFound);
    };
    let run = crate::runs::get(&mut *db, key)
        .await?
        .expect("the cancel locked this row in this transaction");
    Ok(match before {
        RunStatus::Cancelling => Cancel::AlreadyCancelling(run),
        status if status.terminal() => Cancel::Finished(run),
        _ if run.status == RunStatus::Cancelling => Cancel::Cancelling(run),
        _ => Cancel::Cancelled(run),
    })
}

/// The cancel. `cur` locks the row (concurrent cancels and reports queue up and each sees
/// the latest status); `upd` moves an unfinished run; `released` frees the oldest `QUEUED`
/// run of the schedule when a run that held it (`RETRYING`) was cancelled at once, and
/// `woken` tells dispatchers. Returns the status before.
///
/// Parameters: $1 key, $2 reason, $3 pinned now, $4 wake-up channel.
static REQUEST: LazyLock<String> = LazyLock::new(|| {
    format!(
        "
with cur as (
    select idempotency_key, status from schedule_runs where idempotency_key = $1 for update
), upd as (
    update schedule_runs r set
        status = case when cur.status in {unpublished} then 'CANCELLED'
                      else 'CANCELLING' end,
        reason = $2,
        finished_at = case when cur.status in {unpublished}
                           then coalesce($3, clock_timestamp()) else r.finished_at end,
        cancel_requested_at = coalesce($3, clock_timestamp()),
        cancel_sent_at = null,
        updated_at = coalesce($3, clock_timestamp())
    from cur
    where r.idempotency_key = cur.idempotency_key
      and cur.status in {cancellable}
    returning r.schedule_id, r.status, r.exclusive, cur.status as before
), released as (
    update schedule_runs q set status = 'PENDING', reason = null,
        released_at = coalesce($3, clock_timestamp()),
        updated_at = coalesce($3, clock_timestamp())
    where q.idempotency_key = (
        select w.idempotency_key from schedule_runs w join upd on w.schedule_id = upd.schedule_id
        where upd.exclusive and upd.before = 'RETRYING' and w.status = 'QUEUED'
        order by w.fire_at, w.idempotency_key limit 1)
    returning q.idempotency_key
), woken as (
    select pg_notify($4, '') from released
)
select cur.status from cur left join (select count(*) as n from woken) as w on true",
        unpublished = *crate::groups::UNPUBLISHED,
        // Not final and not already being cancelled.
        cancellable = crate::groups::list(|s| !s.terminal() && s != RunStatus::Cancelling),
    )
});

/// A cancel message to send: a `CANCELLING` run the stream has not acknowledged one for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsent {
    /// The run.
    pub idempotency_key: String,
    /// Its workflow (the subject's last token).
    pub workflow_id: String,
    /// Its schedule.
    pub schedule_id: String,
    /// The executor's run id, if it reported one.
    pub run_id: Option<String>,
    /// The attempt in progress.
    pub attempt: i32,
    /// Why it is cancelled.
    pub reason: Option<String>,
    /// When the cancel was asked for.
    pub cancel_requested_at: DateTime<Utc>,
}

/// The row [`unsent`] reads into an [`Unsent`].
#[derive(sqlx::FromRow)]
struct UnsentRow {
    idempotency_key: String,
    workflow_id: String,
    schedule_id: String,
    run_id: Option<String>,
    attempt: i32,
    reason: Option<String>,
    cancel_requested_at: DateTime<Utc>,
}

impl From<UnsentRow> for Unsent {
    fn from(row: UnsentRow) -> Unsent {
        Unsent {
            idempotency_key: row.idempotency_key,
            workflow_id: row.workflow_id,
            schedule_id: row.schedule_id,
            run_id: row.run_id,
            attempt: row.attempt,
            reason: row.reason,
            cancel_requested_at: row.cancel_requested_at,
        }
    }
}

/// Locks up to `limit` `CANCELLING` runs whose cancel message is not sent, oldest request
/// first, skipping runs another transaction holds (a killed sender leaves them for the
/// next; the message id de-duplicates a second copy).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn unsent(tx: &mut PgConnection, limit: i64) -> Result<Vec<Unsent>> {
    let rows: Vec<UnsentRow> = sqlx::query_as(&format!(
        "select r.idempotency_key, r.workflow_id, r.schedule_id, r.run_id, r.attempt, r.reason, \
           c.requested_at as cancel_requested_at \
         from (select idempotency_key, run_at, requested_at from run_cancels \
               where sent_at is null order by requested_at, idempotency_key limit $1) c \
         cross join lateral ({locked}) r \
         order by c.requested_at, c.idempotency_key",
        locked = locked_run(
            "r.idempotency_key, r.workflow_id, r.schedule_id, r.run_id, r.attempt, r.reason",
            "r.cancel_sent_at is null"
        ),
    ))
    .bind(limit)
    .fetch_all(&mut *tx)
    .await?;
    Ok(rows.into_iter().map(Unsent::from).collect())
}

/// Records that the cancel messages of `keys` were acknowledged at `now`.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn mark_sent(tx: &mut PgConnection, keys: &[String], now: DateTime<Utc>) -> Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "update schedule_runs set cancel_sent_at = $2 \
         where idempotency_key = any($1) and status = 'CANCELLING'",
    )
    .bind(keys)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// `CANCELLING` runs asked to cancel more than `timeout_s` ago without a confirmation
/// become `CANCELLED` with a reason saying so; they stop holding their schedule (the
/// sweep's release of `QUEUED` runs follows). Returns their keys.
///
/// # Errors
/// [`crate::Error::Database`] when a statement fails.
pub async fn time_out(
    tx: &mut PgConnection,
    now: DateTime<Utc>,
    timeout_s: f64,
) -> Result<Vec<String>> {
    let due: Vec<(String, DateTime<Utc>)> = sqlx::query_as(&format!(
        "select r.idempotency_key, r.run_at from run_cancels c \
         cross join lateral ({locked}) r \
         where c.requested_at < $1 - make_interval(secs => $2)",
        locked = locked_run("r.idempotency_key, r.run_at", "true"),
    ))
    .bind(now)
    .bind(timeout_s)
    .fetch_all(&mut *tx)
    .await?;
    if due.is_empty() {
        return Ok(Vec::new());
    }
    let (keys, run_ats): (Vec<String>, Vec<DateTime<Utc>>) = due.into_iter().unzip();
    Ok(sqlx::query_scalar(
        "update schedule_runs u set status = 'CANCELLED', finished_at = $1, updated_at = $1, \
           reason = format('cancelled: the executor did not confirm the cancel within %s s \
             (cancel_timeout_s); %s', $2::float8, coalesce(u.reason, 'no reason given')) \
         from unnest($3::text[], $4::timestamptz[]) as d(idempotency_key, run_at) \
         where u.idempotency_key = d.idempotency_key and u.run_at = d.run_at \
         returning u.idempotency_key",
    )
    .bind(now)
    .bind(timeout_s)
    .bind(&keys)
    .bind(&run_ats)
    .fetch_all(&mut *tx)
    .await?)
}

/// The run of the outbox row `c`, locked, if it is still `CANCELLING` and `also` holds (a
/// report may have ended it since the outbox row was read); none if another transaction
/// holds it. Selects `columns` of `r`.
///
/// Written so the plan can only start from the outbox: a sub-select with a locking clause
/// is not merged into the outer query, so `r` is looked up by the outbox row's primary key,
/// and the status is tested as `(…) is true`, from which the planner cannot prove the
/// predicate of `schedule_runs_in_flight`. With `r.status = 'CANCELLING'` it could, and with
/// statistics of the newest partition taken while few runs were in flight it chose to scan
/// that whole index instead (see `migrations/20260204000000_cancel_outbox.sql`).
fn locked_run(columns: &str, also: &str) -> String {
    format!(
        "select {columns} from schedule_runs r \
         where r.idempotency_key = c.idempotency_key and r.run_at = c.run_at \
           and (r.status = 'CANCELLING') is true and {also} \
         for update skip locked"
    )
}
