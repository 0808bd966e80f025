//! The daily partitions of `schedule_runs` (migration `20260116000000_partitions.sql`):
//! making them ahead of time, and retiring an old day by dropping it whole.
//!
//! A day `D` (UTC) is the partition `schedule_runs_pYYYYMMDD` with range `[D, D + 1 day)` of
//! `run_at`. Rows no daily partition covers go to `schedule_runs_default`, so correctness never
//! depends on a partition existing: a missing day only costs retention its fast path.
//!
//! Both operations change the partition set, which PostgreSQL does under an `ACCESS
//! EXCLUSIVE` lock on `schedule_runs`: every statement on runs waits for it. They wait at most
//! [`LOCK_TIMEOUT`] for the lock (and the hot path waits behind them no longer than that plus
//! the statement), then give up until the next pass. The expensive reads (is anything in this
//! day still kept?) run before the lock, without blocking anyone.

use chrono::{DateTime, Days, NaiveDate, Utc};
use sqlx::{PgConnection, PgPool};

use crate::retention::{terminal_names, RetentionRule};
use crate::Result;

/// The statement bound of the reads and deletes that cover a whole day (a day holds up to
/// 144 M runs at full scale), instead of the sessions' 60 s.
pub const CHECK_TIMEOUT: &str = "30min";

/// The partition that holds every row no daily partition covers.
pub const DEFAULT_PARTITION: &str = "schedule_runs_default";

/// How long a partition change waits for its lock on `schedule_runs` before it gives up (and
/// is tried again on the next pass).
pub const LOCK_TIMEOUT: &str = "1s";

/// One daily partition: the runs whose `run_at` falls on `day` (UTC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DayPartition {
    /// The day.
    pub day: NaiveDate,
}

impl DayPartition {
    /// The partition of `day`.
    pub fn new(day: NaiveDate) -> DayPartition {
        DayPartition { day }
    }

    /// Its table name, `schedule_runs_pYYYYMMDD` (digits only, so safe to splice into DDL).
    pub fn name(&self) -> String {
        format!("schedule_runs_p{}", self.day.format("%Y%m%d"))
    }

    /// The first instant of its range (inclusive).
    pub fn from(&self) -> DateTime<Utc> {
        self.day.and_time(chrono::NaiveTime::MIN).and_utc()
    }

    /// The end of its range (exclusive): the next day's first instant.
    pub fn to(&self) -> DateTime<Utc> {
        DayPartition::new(self.day + Days::new(1)).from()
    }

    fn parse(name: &str) -> Option<DayPartition> {
        let digits = name.strip_prefix("schedule_runs_p")?;
        if digits.len() != 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        NaiveDate::parse_from_str(digits, "%Y%m%d")
            .ok()
            .map(DayPartition::new)
    }
}

/// The daily partitions of `schedule_runs`, oldest first.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn list(db: &PgPool) -> Result<Vec<DayPartition>> {
    let names: Vec<String> = sqlx::query_scalar(
        "select c.relname::text from pg_inherits i join pg_class c on c.oid = i.inhrelid \
         where i.inhparent = 'schedule_runs'::regclass",
    )
    .fetch_all(db)
    .await?;
    let mut days: Vec<DayPartition> = names
        .iter()
        .filter_map(|name| DayPartition::parse(name))
        .collect();
    days.sort_by_key(|partition| partition.day);
    Ok(days)
}

/// What [`create_ahead`] did, day by day.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ahead {
    /// Days whose partition this call created.
    pub created: Vec<NaiveDate>,
    /// Days whose partition already existed.
    pub existing: Vec<NaiveDate>,
    /// Days left without a partition because the default partition holds runs of that day
    /// (a partition over them cannot be created; they stay in the default, which is correct).
    pub in_default: Vec<NaiveDate>,
}

/// Makes the partitions of the day of `now` and the `days_ahead` days after it (UTC), each
/// unless it exists. Idempotent; safe on every instance at once. A day the default partition
/// already holds runs of is skipped (see [`Ahead::in_default`]).
///
/// # Errors
/// [`crate::Error::Database`] when a statement fails, including a lock not granted within
/// [`LOCK_TIMEOUT`] (the days made before it stay made).
pub async fn create_ahead(db: &PgPool, now: DateTime<Utc>, days_ahead: u32) -> Result<Ahead> {
    let mut ahead = Ahead::default();
    let existing: Vec<NaiveDate> = list(db).await?.into_iter().map(|p| p.day).collect();
    let today = now.date_naive();
    for offset in 0..=u64::from(days_ahead) {
        let partition = DayPartition::new(today + Days::new(offset));
        if existing.contains(&partition.day) {
            ahead.existing.push(partition.day);
            continue;
        }
        let mut tx = db.begin().await?;
        if create(&mut tx, &partition).await? {
            tx.commit().await?;
            ahead.created.push(partition.day);
        } else {
            ahead.in_default.push(partition.day);
        }
    }
    Ok(ahead)
}

/// Creates one day's partition in the caller's transaction, unless the default partition
/// holds runs of that day (`false`). The check is an index probe; the lock taken by `create
/// table ... partition of` makes it exact (PostgreSQL also checks the default partition
/// itself and refuses, which this reads as `false` too).
async fn create(tx: &mut PgConnection, partition: &DayPartition) -> Result<bool> {
    sqlx::query(&format!("set local lock_timeout = '{LOCK_TIMEOUT}'"))
        .execute(&mut *tx)
        .await?;
    let in_default: bool = sqlx::query_scalar(&format!(
        "select exists (select 1 from {DEFAULT_PARTITION} where run_at >= $1 and run_at < $2)"
    ))
    .bind(partition.from())
    .bind(partition.to())
    .fetch_one(&mut *tx)
    .await?;
    if in_default {
        return Ok(false);
    }
    let ddl = format!(
        "create table if not exists {} partition of schedule_runs \
         for values from ('{}') to ('{}')",
        partition.name(),
        partition.from().to_rfc3339(),
        partition.to().to_rfc3339()
    );
    match sqlx::query(&ddl).execute(&mut *tx).await {
        Ok(_) => Ok(true),
        // check_violation: rows of that day reached the default partition since the probe.
        Err(sqlx::Error::Database(err)) if err.code().as_deref() == Some("23514") => Ok(false),
        Err(err) => Err(err.into()),
    }
}

/// What [`drop_old`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Days dropped whole.
    pub dropped: Vec<NaiveDate>,
    /// Old days kept because a run in them must be kept (not finished, changed recently, or
    /// among its schedule's newest `keep_last`): row deletes retire the rest of them.
    pub kept: Vec<NaiveDate>,
    /// Runs the dropped days held.
    pub runs: u64,
}

/// Drops every daily partition whose whole range is older than `rule.older_than` and that
/// holds no run [`crate::retention::delete_batch`] would keep: every run in it is finished,
/// unchanged since `older_than`, and not among its schedule's newest `rule.keep_last`. The
/// day's attempts, retry requests and ledger keys go in the same transaction.
///
/// # Errors
/// [`crate::Error::Database`] when a statement fails, including a lock not granted within
/// [`LOCK_TIMEOUT`] (days dropped before it stay dropped).
pub async fn drop_old(db: &PgPool, rule: &RetentionRule) -> Result<Dropped> {
    let mut dropped = Dropped::default();
    for partition in list(db).await? {
        if partition.to() > rule.older_than {
            break;
        }
        if keeps_any(db, &partition, rule).await? {
            dropped.kept.push(partition.day);
            continue;
        }
        match drop_day(db, &partition).await? {
            Some(runs) => {
                dropped.dropped.push(partition.day);
                dropped.runs += runs;
            }
            None => dropped.kept.push(partition.day),
        }
    }
    Ok(dropped)
}

/// Whether the day holds a run retention keeps. Read without locks (a scan of the day and one
/// `keep_last` probe per schedule in it); [`drop_day`] re-checks what can change since.
async fn keeps_any(db: &PgPool, partition: &DayPartition, rule: &RetentionRule) -> Result<bool> {
    let name = partition.name();
    let mut tx = db.begin().await?;
    // A scan of a whole day: at full scale longer than the sessions' usual statement bound.
    sqlx::query(&format!("set local statement_timeout = '{CHECK_TIMEOUT}'"))
        .execute(&mut *tx)
        .await?;
    let keeps = sqlx::query_scalar(&format!(
        "select exists (select 1 from {name} where status <> all($1) or updated_at >= $2) \
           or ($3 > 0 and exists ( \
             select 1 from (select schedule_id, max(run_at) as newest from {name} \
                            group by schedule_id) p \
             where coalesce(p.newest >= ( \
               select k.run_at from schedule_runs k where k.schedule_id = p.schedule_id \
               order by k.run_at desc offset $3 - 1 limit 1), true)))"
    ))
    .bind(terminal_names())
    .bind(rule.older_than)
    .bind(i64::from(rule.keep_last))
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(keeps)
}

/// Drops one day in one transaction: its attempts, logs, retry requests and ledger keys first,
/// then, under the lock on `schedule_runs`, a re-check that no run in it is unfinished (a
/// finished run made live again since [`keeps_any`] read it: an operator retry or a resume;
/// each probe is one of the hot partial indexes, so it costs nothing under the lock), then the
/// drop. `None` when the re-check found one (nothing changed).
async fn drop_day(db: &PgPool, partition: &DayPartition) -> Result<Option<u64>> {
    let name = partition.name();
    let mut tx = db.begin().await?;
    sqlx::query(&format!("set local lock_timeout = '{LOCK_TIMEOUT}'"))
        .execute(&mut *tx)
        .await?;
    sqlx::query(&format!("set local statement_timeout = '{CHECK_TIMEOUT}'"))
        .execute(&mut *tx)
        .await?;
    sqlx::query(&format!(
        "delete from run_attempts a using {name} r where a.idempotency_key = r.idempotency_key"
    ))
    .execute(&mut *tx)
    .await?;
    sqlx::query(&format!(
        "delete from run_logs l using {name} r where l.idempotency_key = r.idempotency_key"
    ))
    .execute(&mut *tx)
    .await?;
    sqlx::query(&format!(
        "delete from run_retry_requests q using {name} r \
         where q.idempotency_key = r.idempotency_key"
    ))
    .execute(&mut *tx)
    .await?;
    sqlx::query("delete from run_keys where run_at >= $1 and run_at < $2")
        .bind(partition.from())
        .bind(partition.to())
        .execute(&mut *tx)
        .await?;
    // Counted before the lock: under it, no finished run can enter or leave the day (a new
    // run is PENDING, which the re-check below refuses).
    let runs: i64 = sqlx::query_scalar(&format!("select count(*) from {name}"))
        .fetch_one(&mut *tx)
        .await?;
    sqlx::query("lock table only schedule_runs in access exclusive mode")
        .execute(&mut *tx)
        .await?;
    // One probe per hot partial index (claim, in flight, queued): together every status
    // that is not final.
    let live: bool = sqlx::query_scalar(&format!(
        "select exists (select 1 from {name} where status in {awaiting}) \
           or exists (select 1 from {name} where status in {holding}) \
           or exists (select 1 from {name} where status = 'QUEUED')",
        awaiting = *crate::groups::AWAITING_LAUNCH,
        holding = *crate::groups::HOLDING
    ))
    .fetch_one(&mut *tx)
    .await?;
    if live {
        tx.rollback().await?;
        return Ok(None);
    }
    sqlx::query(&format!("drop table {name}"))
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Some(u64::try_from(runs).unwrap_or(0)))
}
