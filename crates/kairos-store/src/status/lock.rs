//! [`lock`]: a batch's runs, locked for the intake to decide their reports.
//!
//! A report names its run by key alone, and `schedule_runs` is partitioned by day
//! (`run_at`), so a key could be in any partition: with retention and the days made ahead,
//! dozens. Nearly every report is about a run of the last hours, so a batch's keys are first
//! looked for among the runs of [`RECENT_BEFORE`] to [`RECENT_AFTER`] around now (the
//! partitions of those days alone), and only the keys not found there in every partition.
//!
//! A run another transaction holds is named busy, with the holder's transaction id when it
//! can be told ([`Locked::holding`]), so the caller can try it again as soon as [`ended`]
//! says that transaction is over instead of on a timer alone.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use chrono::{DateTime, TimeDelta, Utc};
use kairos_core::{FailurePolicy, Run, RunStatus};
use sqlx::{PgConnection, PgExecutor};

use crate::rows::{FailureRow, RunRow};
use crate::runs::RUN_COLUMNS;
use crate::Result;

/// How long before now a run's `run_at` may be for its report to find it in the first
/// look (a run reported later is found in the second, among every partition).
pub const RECENT_BEFORE: TimeDelta = TimeDelta::days(1);
/// How long after now a run's `run_at` may be for the first look (a pre-staged or jittered
/// run is published before its `run_at`).
pub const RECENT_AFTER: TimeDelta = TimeDelta::hours(1);

/// A run of the batch, locked by this transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct LockedRun {
    /// The row as it is.
    pub run: Run,
    /// Its `exclusive` column: it counts against its schedule's one in flight.
    pub exclusive: bool,
    /// Were it to become in flight now, it would be exclusive (its schedule's overlap
    /// policy is not `allow`, and it is not a `run-launcher/start` run).
    pub exclusive_now: bool,
    /// Its schedule's failure handling (the defaults when the schedule is gone).
    pub failure: FailurePolicy,
}

/// The batch's runs as [`lock`] found them.
#[derive(Debug, Clone, PartialEq)]
pub struct Locked {
    /// The database's clock (or the pinned "now") when they were locked: the time every
    /// change of the batch records.
    pub now: DateTime<Utc>,
    /// The runs locked, by key.
    pub runs: HashMap<String, LockedRun>,
    /// Keys of runs that exist but another transaction holds: try them again later.
    pub busy: Vec<String>,
    /// For the busy runs whose holding transaction could be told: its full id (`xid8`), for
    /// [`ended`].
    pub holding: HashMap<String, i64>,
    /// For the exclusive schedules of the batch's `PENDING` runs: the runs holding each
    /// (`runs_in_flight`), and its limit.
    pub holders: HashMap<String, Holders>,
}

/// The runs holding an exclusive schedule, and how many may.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holders {
    /// Keys of the runs in flight.
    pub keys: Vec<String>,
    /// The schedule's `max_in_flight` (one when unset).
    pub limit: i64,
}

impl Holders {
    /// A run, other than `key`, that keeps `key` out: the schedule holds its limit of
    /// other runs. `None` when `key` may take a slot.
    pub fn blocking(&self, key: &str) -> Option<&str> {
        let mut others = self.keys.iter().filter(|k| *k != key);
        let first = others.clone().next()?;
        let n = i64::try_from(others.by_ref().count()).unwrap_or(i64::MAX);
        (n >= self.limit).then_some(first.as_str())
    }

    /// `key` left the schedule's runs in flight.
    pub fn leave(&mut self, key: &str) {
        self.keys.retain(|k| k != key);
    }

    /// `key` holds the schedule now.
    pub fn enter(&mut self, key: &str) {
        if !self.keys.iter().any(|k| k == key) {
            self.keys.push(key.to_string());
        }
    }
}

/// `RUN_COLUMNS` qualified with the alias `r`, for statements that join other tables.
fn run_columns_of_r() -> &'static str {
    static COLUMNS: OnceLock<String> = OnceLock::new();
    COLUMNS.get_or_init(|| {
        RUN_COLUMNS
            .split(',')
            .map(|column| format!("r.{}", column.trim()))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// Locks the runs named by `keys` that no other transaction holds, in key order (so two
/// batches never deadlock; neither look waits for a lock), with what deciding their
/// reports needs: first among the recent runs, then, for the keys not found there, among
/// all.
///
/// # Errors
/// [`crate::Error::Database`] when a statement fails.
pub async fn lock(
    db: &mut PgConnection,
    keys: &[String],
    pinned: Option<DateTime<Utc>>,
) -> Result<Locked> {
    let now: DateTime<Utc> = sqlx::query_scalar("select coalesce($1, clock_timestamp())")
        .bind(pinned)
        .fetch_one(&mut *db)
        .await?;
    let recent = Some((now - RECENT_BEFORE, now + RECENT_AFTER));
    let mut runs = lock_runs(db, keys, recent).await?;
    let mut held_runs = held(db, &not_in(keys, &runs, &[]), recent).await?;
    let busy = |held_runs: &[(String, Option<i64>)]| -> Vec<String> {
        held_runs.iter().map(|(key, _)| key.clone()).collect()
    };
    let rest = not_in(keys, &runs, &busy(&held_runs));
    if !rest.is_empty() {
        let older = lock_runs(db, &rest, None).await?;
        let missing = not_in(&rest, &older, &[]);
        runs.extend(older);
        held_runs.extend(held(db, &missing, None).await?);
    }
    let holders = holders(db, &runs).await?;
    Ok(Locked {
        now,
        runs,
        busy: busy(&held_runs),
        holding: held_runs
            .into_iter()
            .filter_map(|(key, xid)| Some((key, xid?)))
            .collect(),
        holders,
    })
}

/// Of the transactions `xids` (full ids, from [`Locked::holding`]), those no longer in
/// progress: committed, rolled back, or too old to tell. An id at or past the snapshot's
/// `xmax` has not ended (and is not asked about: it may not have been given out).
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn ended(db: impl PgExecutor<'_>, xids: &[i64]) -> Result<Vec<i64>> {
    Ok(sqlx::query_scalar(
        "select x from unnest($1::int8[]) as u(x) \
         where case when x < pg_snapshot_xmax(pg_current_snapshot())::text::int8 \
           then pg_xact_status(x::text::xid8) is distinct from 'in progress' else false end",
    )
    .bind(xids)
    .fetch_all(db)
    .await?)
}

/// The full id of the 32-bit transaction id `xid` (a row's `xmax`), given a full id
/// `reference` taken at the same time (the snapshot's `xmax`): the one nearest to it, since a
/// transaction holding a row now is far less than 2^31 ids away. `None` for an id no
/// transaction ever had (0, and the reserved 1 and 2). A row several transactions lock
/// carries a multixact id instead, which this cannot tell apart, so a caller never relies on
/// it alone.
pub(crate) fn full_xid(xid: i64, reference: i64) -> Option<i64> {
    let xid = u32::try_from(xid).ok().filter(|xid| *xid >= 3)?;
    let low = (reference & i64::from(u32::MAX)) as u32;
    #[allow(clippy::cast_possible_wrap)]
    let delta = xid.wrapping_sub(low) as i32;
    Some(reference + i64::from(delta)).filter(|full| *full >= 3)
}

/// The keys of `keys` neither in `runs` nor in `busy`.
fn not_in(keys: &[String], runs: &HashMap<String, LockedRun>, busy: &[String]) -> Vec<String> {
    let busy: HashSet<&str> = busy.iter().map(String::as_str).collect();
    keys.iter()
        .filter(|k| !runs.contains_key(*k) && !busy.contains(k.as_str()))
        .cloned()
        .collect()
}

/// The condition of a look, on the runs aliased `alias` (with its dot, or empty): the key
/// is in `$1`, and with a window the `run_at` in `[$2, $3]` (which leaves out every other
/// partition).
fn among(window: Option<(DateTime<Utc>, DateTime<Utc>)>, alias: &str) -> String {
    match window {
        Some(_) => {
            format!("{alias}idempotency_key = any($1) and {alias}run_at between $2 and $3")
        }
        None => format!("{alias}idempotency_key = any($1)"),
    }
}

/// Locks the runs of `keys` (in `window`, when given) that no other transaction holds.
async fn lock_runs(
    db: &mut PgConnection,
    keys: &[String],
    window: Option<(DateTime<Utc>, DateTime<Utc>)>,
) -> Result<HashMap<String, LockedRun>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten, try_from = "RunRow")]
        run: Run,
        exclusive: bool,
        exclusive_now: bool,
        #[sqlx(flatten, try_from = "FailureRow")]
        failure: FailurePolicy,
    }
    if keys.is_empty() {
        return Ok(HashMap::new());
    }
    let sql = format!(
        "select {}, r.exclusive, \
           r.source <> 'api' and coalesce(s.overlap_policy <> 'allow', false) as exclusive_now, \
           coalesce(s.max_attempts, 1) as max_attempts, s.retry_intervals_s, \
           s.retry_backoff_initial_s, s.retry_backoff_multiplier, s.retry_backoff_max_s, \
           s.heartbeat_timeout_s, s.start_timeout_s \
         from schedule_runs r left join schedules s on s.schedule_id = r.schedule_id \
         where {} \
         order by r.idempotency_key, r.run_at \
         for update of r skip locked",
        run_columns_of_r(),
        among(window, "r.")
    );
    let mut query = sqlx::query_as::<_, Row>(&sql).bind(keys);
    if let Some((from, to)) = window {
        query = query.bind(from).bind(to);
    }
    let rows = query.fetch_all(&mut *db).await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let locked = LockedRun {
                exclusive: row.exclusive,
                exclusive_now: row.exclusive_now,
                failure: row.failure,
                run: row.run,
            };
            (locked.run.idempotency_key.clone(), locked)
        })
        .collect())
}

/// The keys of `missing` (in `window`, when given) that name a run: a lock that skipped
/// them means another transaction holds them. With each, the holder's full transaction id
/// when the row's `xmax` tells it. A plain read never waits for a row lock.
async fn held(
    db: &mut PgConnection,
    missing: &[String],
    window: Option<(DateTime<Utc>, DateTime<Utc>)>,
) -> Result<Vec<(String, Option<i64>)>> {
    if missing.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "select idempotency_key, xmax::text::int8, \
           pg_snapshot_xmax(pg_current_snapshot())::text::int8 \
         from schedule_runs where {}",
        among(window, "")
    );
    let mut query = sqlx::query_as::<_, (String, i64, i64)>(&sql).bind(missing);
    if let Some((from, to)) = window {
        query = query.bind(from).bind(to);
    }
    let rows = query.fetch_all(&mut *db).await?;
    Ok(rows
        .into_iter()
        .map(|(key, xmax, next)| (key, full_xid(xmax, next)))
        .collect())
}

/// For the exclusive schedules of `runs`' `PENDING` runs: the runs holding each, and its
/// limit.
async fn holders(
    db: &mut PgConnection,
    runs: &HashMap<String, LockedRun>,
) -> Result<HashMap<String, Holders>> {
    let contested: Vec<&str> = runs
        .values()
        .filter(|locked| locked.run.status == RunStatus::Pending && locked.exclusive_now)
        .map(|locked| locked.run.schedule_id.as_str())
        .collect();
    let mut holders: HashMap<String, Holders> = HashMap::new();
    if !contested.is_empty() {
        // One row per contested schedule with no run in flight, so each has its limit.
        let rows: Vec<(String, Option<String>, i64)> = sqlx::query_as(
            "select ids.id, f.idempotency_key, coalesce(s.max_in_flight, 1)::int8 \
             from (select distinct id from unnest($1::text[]) as u(id)) ids \
             left join schedules s on s.schedule_id = ids.id \
             left join runs_in_flight f on f.schedule_id = ids.id \
             order by ids.id, f.slot",
        )
        .bind(contested)
        .fetch_all(&mut *db)
        .await?;
        for (schedule_id, key, limit) in rows {
            let held = holders.entry(schedule_id).or_default();
            held.keys.extend(key);
            held.limit = limit;
        }
    }
    Ok(holders)
}

#[cfg(test)]
mod tests {
    use super::full_xid;

    #[test]
    fn a_rows_xmax_is_placed_nearest_the_snapshot() {
        let epoch = 5_i64 << 32;
        assert_eq!(full_xid(1_000, epoch + 2_000), Some(epoch + 1_000));
        // A holder still running may be past the snapshot's xmax.
        assert_eq!(full_xid(2_500, epoch + 2_000), Some(epoch + 2_500));
        // Issued before the low half wrapped: the epoch before.
        assert_eq!(
            full_xid(4_000_000_000, epoch + 2_000),
            Some((4_i64 << 32) + 4_000_000_000)
        );
        // Issued after it wrapped, the snapshot from before.
        assert_eq!(
            full_xid(10, (4_i64 << 32) + 4_294_967_000),
            Some(epoch + 10)
        );
        assert_eq!(full_xid(0, epoch + 2_000), None, "no holder");
        assert_eq!(full_xid(2, epoch + 2_000), None, "reserved");
        assert_eq!(full_xid(4_000_000_000, 2_000), None, "before the first id");
        assert_eq!(full_xid(1_i64 << 32, epoch), None, "not a 32-bit id");
    }
}
