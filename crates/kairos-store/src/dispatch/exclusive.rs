//! Exclusive schedules: their dispatch locks (`schedule_dispatch_locks`, one row lock per
//! schedule) and what stands in the way of launching their next run.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use super::EXCLUSIVE_LOCK_SPACE;
use crate::groups::HOLDING;
use crate::Result;

/// Takes the dispatch lock of each exclusive schedule for this transaction, without
/// waiting: its row of `schedule_dispatch_locks`, `for update skip locked` (a row lock, so
/// a burst of any size fits; migration `20260125000000_dispatch_locks.sql` says why). A
/// schedule with no row there (created by hand, say) falls back to a transaction-scoped
/// advisory lock. Returns the schedules whose lock this transaction now holds; the others
/// are being dispatched by another transaction, and their runs wait for the next round.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn lock_schedules(
    tx: &mut PgConnection,
    schedule_ids: &[String],
) -> Result<HashSet<String>> {
    if schedule_ids.is_empty() {
        return Ok(HashSet::new());
    }
    // A row another transaction holds is skipped by the first part and, being there, is
    // not taken by the second either. The `case` makes the existence test come first: in a
    // plain `and` the planner would run the cheaper advisory lock first, for every id.
    let held: Vec<String> = sqlx::query_scalar(
        "with locked as ( \
           select l.schedule_id from schedule_dispatch_locks l \
           where l.schedule_id = any($1) for update skip locked \
         ) \
         select schedule_id from locked \
         union all \
         select id from unnest($1::text[]) as id \
         where case when exists (select 1 from schedule_dispatch_locks l \
                                 where l.schedule_id = id) then false \
                    else pg_try_advisory_xact_lock($2, hashtext(id)) end",
    )
    .bind(schedule_ids)
    .bind(EXCLUSIVE_LOCK_SPACE)
    .fetch_all(&mut *tx)
    .await?;
    Ok(held.into_iter().collect())
}

/// What stands in the way of launching a schedule's next run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Blockers {
    /// The schedule.
    pub schedule_id: String,
    /// The key of the oldest run (by `fire_at`) that holds the schedule (`ENQUEUED`,
    /// `STARTED`, `RETRYING` or `CANCELLING`), if any: the one `cancel_other` cancels.
    pub in_flight: Option<String>,
    /// How many runs hold the schedule.
    pub in_flight_count: i64,
    /// The schedule's limit on runs in flight (`None`: one).
    pub max_in_flight: Option<i32>,
    /// The `fire_at` of the oldest `QUEUED` run, if any: a younger run must queue behind
    /// it (overlap `queue` keeps the order).
    pub first_queued: Option<DateTime<Utc>>,
    /// How many runs are `QUEUED`.
    pub queued: i64,
    /// The schedule's bound on `QUEUED` runs under overlap `queue` (`None`: unbounded).
    pub max_queued: Option<i32>,
}

/// The row [`blockers`] reads into a [`Blockers`].
#[derive(sqlx::FromRow)]
struct BlockersRow {
    schedule_id: String,
    in_flight: Option<String>,
    in_flight_count: i64,
    max_in_flight: Option<i32>,
    first_queued: Option<DateTime<Utc>>,
    queued: i64,
    max_queued: Option<i32>,
}

impl From<BlockersRow> for Blockers {
    fn from(row: BlockersRow) -> Blockers {
        Blockers {
            schedule_id: row.schedule_id,
            in_flight: row.in_flight,
            in_flight_count: row.in_flight_count,
            max_in_flight: row.max_in_flight,
            first_queued: row.first_queued,
            queued: row.queued,
            max_queued: row.max_queued,
        }
    }
}

impl Blockers {
    /// Nothing in flight and nothing queued: the schedule's next run may go out.
    pub fn clear(&self) -> bool {
        self.in_flight_count == 0 && self.queued == 0
    }
}

/// In-flight and queued runs of `schedule_ids`, one entry each. Call it after
/// [`lock_schedules`]: with the lock held, a committed publish by another dispatcher is
/// visible to this statement.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn blockers(
    tx: &mut PgConnection,
    schedule_ids: &[String],
) -> Result<HashMap<String, Blockers>> {
    if schedule_ids.is_empty() {
        return Ok(HashMap::new());
    }
    // Per schedule: one probe of schedule_runs_in_flight and one of schedule_runs_queued.
    let rows: Vec<BlockersRow> = sqlx::query_as(&format!(
        "select ids.id as schedule_id, f.oldest as in_flight, \
           coalesce(f.n, 0) as in_flight_count, s.max_in_flight, \
           q.first_queued, coalesce(q.n, 0) as queued, s.max_queued \
         from unnest($1::text[]) as ids(id) \
         left join schedules s on s.schedule_id = ids.id \
         left join lateral (select count(*) as n, (array_agg(r.idempotency_key \
             order by r.fire_at, r.idempotency_key))[1] as oldest \
           from schedule_runs r where r.schedule_id = ids.id and r.status in {HOLDING}) f \
           on true \
         left join lateral (select min(w.fire_at) as first_queued, count(*) as n \
           from schedule_runs w where w.schedule_id = ids.id and w.status = 'QUEUED') q on true",
        HOLDING = *HOLDING
    ))
    .bind(schedule_ids)
    .fetch_all(&mut *tx)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.schedule_id.clone(), Blockers::from(row)))
        .collect())
}

/// Takes, before a pre-staged wave's tick (`first`, the earliest `fire_at` of the round's
/// runs), the dispatch lock of each of `schedule_ids` that is clear: no run in flight, none
/// `QUEUED`, and no `PENDING` run due before `first`. Never waits. The others are left to
/// be locked at the tick, by [`lock_schedules`], so that holding their lock until then
/// keeps nothing back: a run in flight may end and a queued one be released and published
/// meanwhile, and an earlier run (another round holds it, or it is due and not claimed
/// yet) goes out first instead of waiting for this wave. Clear is judged in this
/// statement's snapshot: read [`blockers`] again for the schedules it returns. Returns the
/// schedules whose lock this transaction now holds.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn lock_ahead(
    tx: &mut PgConnection,
    schedule_ids: &[String],
    first: DateTime<Utc>,
) -> Result<HashSet<String>> {
    if schedule_ids.is_empty() {
        return Ok(HashSet::new());
    }
    // The earlier runs are read once, by the range of the due index before `first` (the
    // runs other rounds hold for the same moments, or none), not by a probe of every
    // schedule's runs in every partition; runs in flight and queued by the partial indexes
    // that `blockers` probes.
    let held: Vec<String> = sqlx::query_scalar(&format!(
        "with earlier as materialized ( \
           select distinct r.schedule_id from schedule_runs r \
           where r.status = 'PENDING' and r.fire_at < $2 \
         ) \
         select l.schedule_id from schedule_dispatch_locks l \
         where l.schedule_id = any($1) \
           and not exists (select 1 from earlier e where e.schedule_id = l.schedule_id) \
           and not exists (select 1 from schedule_runs f \
                           where f.schedule_id = l.schedule_id and f.status in {HOLDING}) \
           and not exists (select 1 from schedule_runs q \
                           where q.schedule_id = l.schedule_id and q.status = 'QUEUED') \
         for update of l skip locked",
        HOLDING = *HOLDING
    ))
    .bind(schedule_ids)
    .bind(first)
    .fetch_all(&mut *tx)
    .await?;
    Ok(held.into_iter().collect())
}
