//! A wave's launches, recorded before they are published. The dispatcher records a wave's
//! runs `ENQUEUED` and names them in `launch_waves` (those recorded ahead of the tick in one
//! row, those recorded at it in another), commits, and only then publishes: the first report
//! of any of them finds its run committed and free. Once every acknowledgement is in,
//! [`acknowledge`] puts back the runs whose publish failed and deletes the wave's rows, in
//! one transaction.
//!
//! A dispatcher killed between its commit and [`acknowledge`] leaves the row behind. The
//! sweeper takes it once it is older than its grace period ([`unacknowledged`]), publishes
//! the runs still `ENQUEUED` again under their own `Nats-Msg-Id` (the stream drops those it
//! already stored as duplicates) and deletes it ([`close`]).

use chrono::{DateTime, Utc};
use kairos_core::{Run, RunStatus};
use sqlx::{PgConnection, PgPool};

use super::{Claimed, Outcome, RunSpan};
use crate::groups::AWAITING_LAUNCH;
use crate::rows::RunRow;
use crate::Result;

/// One recorded wave whose publishes are not acknowledged yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Wave(i64);

/// Records `runs` `ENQUEUED` (each with whether it counts against its schedule's runs in
/// flight), publish attempt counted, in the caller's transaction. A run's `published_at` is
/// when it is let out: its `fire_at`, or `now` when that has passed. Returns how many runs
/// moved (a run no longer awaiting its launch is left as it is). Each run's `region` is
/// recorded as its `launch_region`: every later publish of the run goes there.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails, including a second exclusive run
/// in flight for one schedule (which the dispatch lock prevents).
pub async fn record_launches(
    tx: &mut PgConnection,
    runs: &[(&Claimed, bool)],
    span: RunSpan,
    now: DateTime<Utc>,
) -> Result<u64> {
    if runs.is_empty() {
        return Ok(0);
    }
    let keys: Vec<&str> = runs
        .iter()
        .map(|(run, _)| run.idempotency_key.as_str())
        .collect();
    let exclusive: Vec<bool> = runs.iter().map(|(_, exclusive)| *exclusive).collect();
    let fire_ats: Vec<DateTime<Utc>> = runs.iter().map(|(run, _)| run.fire_at).collect();
    let regions: Vec<Option<&str>> = runs.iter().map(|(run, _)| run.region.as_deref()).collect();
    let moved = sqlx::query(&format!(
        "update schedule_runs r set status = 'ENQUEUED', stream_seq = null, \
           published_at = greatest(v.fire_at, $4), attempts = r.attempts + 1, \
           exclusive = v.exclusive, updated_at = $4, launch_region = v.region \
         from unnest($1::text[], $2::bool[], $3::timestamptz[], $7::text[]) \
           as v(key, exclusive, fire_at, region) \
         where r.idempotency_key = v.key and r.status in {AWAITING_LAUNCH} \
           and r.run_at between $5 and $6",
        AWAITING_LAUNCH = *AWAITING_LAUNCH
    ))
    .bind(keys)
    .bind(exclusive)
    .bind(fire_ats)
    .bind(now)
    .bind(span.first)
    .bind(span.last)
    .bind(regions)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    Ok(moved)
}

/// Takes back, in the caller's transaction, the launches [`record_launches`] recorded for
/// `runs` (`PENDING` when claimed, none of them published): `PENDING` again, as claimed.
/// A round records a pre-staged wave's launches ahead of its tick and takes back those a
/// schedule write or a decision at the tick changed.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn take_back(tx: &mut PgConnection, runs: &[&Claimed], span: RunSpan) -> Result<()> {
    if runs.is_empty() {
        return Ok(());
    }
    let keys: Vec<&str> = runs
        .iter()
        .map(|run| run.idempotency_key.as_str())
        .collect();
    let exclusive: Vec<bool> = runs.iter().map(|run| run.exclusive).collect();
    let pinned: Vec<Option<&str>> = runs
        .iter()
        .map(|run| run.launch_region.as_deref())
        .collect();
    sqlx::query(
        "update schedule_runs r set status = 'PENDING', published_at = null, \
           stream_seq = null, attempts = r.attempts - 1, exclusive = v.exclusive, \
           launch_region = v.pinned \
         from unnest($1::text[], $2::bool[], $5::text[]) as v(key, exclusive, pinned) \
         where r.idempotency_key = v.key and (r.status = 'ENQUEUED') is true \
           and r.run_at between $3 and $4",
    )
    .bind(keys)
    .bind(exclusive)
    .bind(span.first)
    .bind(span.last)
    .bind(pinned)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Names the runs of a wave about to be published (recorded by [`record_launches`] in the
/// same transaction), so that a dispatcher dying before [`acknowledge`] leaves them to the
/// sweeper. The row counts as recorded when the wave is let out: now, or the latest
/// `fire_at` of its runs when a round names them ahead of their tick, so the sweeper's grace
/// starts at the publishes either way. `None` when there are none.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn open(tx: &mut PgConnection, runs: &[&Claimed]) -> Result<Option<Wave>> {
    let Some(first) = runs.iter().map(|run| run.run_at).min() else {
        return Ok(None);
    };
    let last = runs.iter().map(|run| run.run_at).max().unwrap_or(first);
    let keys: Vec<&str> = runs
        .iter()
        .map(|run| run.idempotency_key.as_str())
        .collect();
    let attempts: Vec<i32> = runs.iter().map(|run| run.attempt).collect();
    let let_out = runs.iter().map(|run| run.fire_at).max();
    let id: i64 = sqlx::query_scalar(
        "insert into launch_waves (recorded_at, run_first, run_last, keys, attempts) \
         values (greatest(clock_timestamp(), $5), $1, $2, $3, $4) returning wave_id",
    )
    .bind(first)
    .bind(last)
    .bind(keys)
    .bind(attempts)
    .bind(let_out)
    .fetch_one(&mut *tx)
    .await?;
    Ok(Some(Wave(id)))
}

/// After a wave's publishes, in a transaction of its own: each run whose publish failed is
/// put back (a retryable error: the status it was claimed in, `PENDING` or `RETRYING`, with
/// the error; a permanent one: `FAILED`), unless a report moved it meanwhile, and the rows
/// naming the wave (one written ahead of its tick, one at it) are deleted. `unsent` pairs
/// each such run with its outcome.
///
/// # Errors
/// [`crate::Error::Database`] when a statement fails (the wave stays for the sweeper).
pub async fn acknowledge(
    pool: &PgPool,
    wave: &[Wave],
    unsent: &[(&Claimed, &Outcome)],
) -> Result<()> {
    let mut tx = pool.begin().await?;
    if !unsent.is_empty() {
        let keys: Vec<&str> = unsent
            .iter()
            .map(|(run, _)| run.idempotency_key.as_str())
            .collect();
        let attempts: Vec<i32> = unsent.iter().map(|(run, _)| run.attempt).collect();
        let statuses: Vec<&str> = unsent
            .iter()
            .map(|(run, outcome)| outcome.new_status().unwrap_or(run.status).as_str())
            .collect();
        let errors: Vec<Option<String>> = unsent
            .iter()
            .map(|(_, outcome)| outcome.launch_error())
            .collect();
        let reasons: Vec<Option<String>> =
            unsent.iter().map(|(_, outcome)| outcome.reason()).collect();
        let first = unsent.iter().map(|(run, _)| run.run_at).min();
        let last = unsent.iter().map(|(run, _)| run.run_at).max();
        sqlx::query(
            "update schedule_runs r set status = v.status, published_at = null, \
               exclusive = false, last_error = coalesce(v.last_error, r.last_error), \
               reason = coalesce(v.reason, r.reason), \
               finished_at = case when v.status = $6 then now() else r.finished_at end, \
               updated_at = now() \
             from unnest($1::text[], $2::int4[], $3::text[], $4::text[], $5::text[]) \
               as v(key, attempt, status, last_error, reason) \
             where r.idempotency_key = v.key and r.attempt = v.attempt \
               and (r.status = 'ENQUEUED') is true and r.run_at between $7 and $8",
        )
        .bind(keys)
        .bind(attempts)
        .bind(statuses)
        .bind(errors)
        .bind(reasons)
        .bind(RunStatus::Failed.as_str())
        .bind(first)
        .bind(last)
        .execute(&mut *tx)
        .await?;
    }
    close(&mut tx, wave).await?;
    tx.commit().await?;
    Ok(())
}

#[derive(sqlx::FromRow)]
struct WaveRun {
    wave_id: i64,
    #[sqlx(flatten, try_from = "RunRow")]
    run: Run,
}

/// Locks up to `limit` waves recorded longer than `grace_s` seconds ago and still not
/// acknowledged (their dispatcher died, or lost its database, between its commit and
/// [`acknowledge`]), skipping those another sweeper holds. Returns each with its runs
/// still `ENQUEUED` in the attempt the wave launched (none when every one moved on).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn unacknowledged(
    tx: &mut PgConnection,
    grace_s: f64,
    limit: i64,
) -> Result<Vec<(Wave, Vec<Run>)>> {
    let waves: Vec<i64> = sqlx::query_scalar(
        "select wave_id from launch_waves \
         where recorded_at < clock_timestamp() - make_interval(secs => $1) \
         order by recorded_at limit $2 for update skip locked",
    )
    .bind(grace_s)
    .bind(limit)
    .fetch_all(&mut *tx)
    .await?;
    if waves.is_empty() {
        return Ok(Vec::new());
    }
    let columns = crate::runs::run_columns_of("r");
    let rows: Vec<WaveRun> = sqlx::query_as(&format!(
        "select w.wave_id, {columns} from launch_waves w \
         cross join lateral unnest(w.keys, w.attempts) as v(key, attempt) \
         join schedule_runs r on r.idempotency_key = v.key and r.attempt = v.attempt \
           and r.run_at between w.run_first and w.run_last \
         where w.wave_id = any($1) and (r.status = 'ENQUEUED') is true \
         order by w.wave_id, r.fire_at, r.idempotency_key"
    ))
    .bind(&waves)
    .fetch_all(&mut *tx)
    .await?;
    let mut found: Vec<(Wave, Vec<Run>)> =
        waves.into_iter().map(|id| (Wave(id), Vec::new())).collect();
    for row in rows {
        if let Some((_, runs)) = found.iter_mut().find(|(wave, _)| wave.0 == row.wave_id) {
            runs.push(row.run);
        }
    }
    Ok(found)
}

/// Deletes the rows of `waves` (their runs are published, or were put back).
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn close(tx: &mut PgConnection, waves: &[Wave]) -> Result<()> {
    let ids: Vec<i64> = waves.iter().map(|wave| wave.0).collect();
    sqlx::query("delete from launch_waves where wave_id = any($1)")
        .bind(ids)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// How many waves are recorded and not yet acknowledged (a gauge, and for tests).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn open_count(pool: &PgPool) -> Result<i64> {
    Ok(sqlx::query_scalar("select count(*) from launch_waves")
        .fetch_one(pool)
        .await?)
}
