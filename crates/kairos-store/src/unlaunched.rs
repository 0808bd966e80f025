//! Ticks that never launched, for schedules with a deadline: a tick that never launched is
//! late as well once its deadline passes. Such a tick gets a `SKIPPED` run
//! with its deadline (`run_at + deadline_s`), under the key a planned run of it would have,
//! so the sweep's judge (`crate::deadlines::judge`) marks it late like any other run:
//! - a missed tick the planner's catch-up policy drops ([`insert_skipped`], planner);
//! - a tick of a paused schedule ([`claim_paused`], [`insert_skipped`] with `paused`,
//!   sweeper): marked `paused_skip`, so that when a resume plans the tick after all (a pause
//!   that ended by itself, caught up per the catch-up policy) [`revive_paused`] turns the
//!   row into that run, keeping its late mark.
//!
//! Schedules without `deadline_s` never get such rows, and nothing here runs for them. A
//! `SKIPPED` run is final: no dispatcher claims it, no sweep publishes it, and a report
//! about it is refused (it was never published).

use chrono::{DateTime, Utc};
use kairos_core::Schedule;
use sqlx::PgExecutor;

use crate::Result;

/// `SKIPPED` runs to write, as columns: each tick's key, schedule, tick and reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkippedTicks {
    /// `RunKey::tick` of the tick, as hex.
    pub idempotency_keys: Vec<String>,
    /// The schedule of each row.
    pub schedule_ids: Vec<String>,
    /// The tick.
    pub run_ats: Vec<DateTime<Utc>>,
    /// Why it was not run.
    pub reasons: Vec<String>,
}

impl SkippedTicks {
    /// Adds one tick.
    pub fn push(&mut self, key: &str, schedule_id: &str, run_at: DateTime<Utc>, reason: &str) {
        self.idempotency_keys.push(key.to_string());
        self.schedule_ids.push(schedule_id.to_string());
        self.run_ats.push(run_at);
        self.reasons.push(reason.to_string());
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        self.idempotency_keys.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.idempotency_keys.is_empty()
    }
}

/// Writes each tick as a `SKIPPED` run (source `schedule`) with its reason (an operator's
/// skip of that tick, `schedule_skips`, wins), ended at its tick, with the deadline its
/// schedule's `deadline_s` gives, marked `paused_skip` when `paused`. The schedules must
/// exist (rows of a deleted one are left out). Keys already stored are left out, as in
/// [`crate::planning::insert_runs`] (one row per tick: a tick that has a run keeps it).
/// Returns how many rows were written.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn insert_skipped(
    db: impl PgExecutor<'_>,
    ticks: &SkippedTicks,
    paused: bool,
    now: DateTime<Utc>,
) -> Result<u64> {
    if ticks.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
         source, workflow_id, version, user_id, created_at, updated_at, priority, revision, \
         deadline_at, deadline_open, reason, finished_at, paused_skip) \
         select t.k, t.s, t.r, t.r, 'SKIPPED', 'schedule', sc.workflow_id, sc.version, \
           sc.user_id, $5, $5, sc.priority, sc.revision, d.at, d.at is not null, \
           coalesce('skipped by ' || sk.skipped_by || coalesce(': ' || sk.note, ''), t.why), \
           t.r, $6 and sk.run_at is null \
         from unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[]) as t(k, s, r, why) \
         join schedules sc on sc.schedule_id = t.s \
         left join schedule_skips sk on sk.schedule_id = t.s and sk.run_at = t.r \
         cross join lateral (select t.r + make_interval(secs => sc.deadline_s) as at) as d \
         where not exists (select 1 from schedule_runs e \
                           where e.idempotency_key = t.k and e.run_at = t.r) \
         on conflict (idempotency_key, run_at) do nothing",
    )
    .bind(&ticks.idempotency_keys)
    .bind(&ticks.schedule_ids)
    .bind(&ticks.run_ats)
    .bind(&ticks.reasons)
    .bind(now)
    .bind(paused)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Turns the `paused_skip` runs among the given ticks (key, tick, new `fire_at`) into the
/// `PENDING` runs a planner pass planned for them, at their schedule's current revision,
/// workflow and priority. The late mark stays; the deadline is open again (judged once the
/// run ends). A tick an operator skipped (`schedule_skips`) stays `SKIPPED`. Returns how
/// many rows changed; the planner's insert then leaves these keys alone (they exist).
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn revive_paused(
    db: impl PgExecutor<'_>,
    keys: &[String],
    run_ats: &[DateTime<Utc>],
    fire_ats: &[DateTime<Utc>],
    now: DateTime<Utc>,
) -> Result<u64> {
    if keys.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query(
        "update schedule_runs r set status = 'PENDING', fire_at = v.f, reason = null, \
           finished_at = null, paused_skip = false, deadline_open = r.deadline_at is not null, \
           updated_at = $4, revision = s.revision, priority = s.priority, \
           workflow_id = s.workflow_id, version = s.version, user_id = s.user_id \
         from unnest($1::text[], $2::timestamptz[], $3::timestamptz[]) as v(k, r, f), \
           schedules s \
         where r.idempotency_key = v.k and r.run_at = v.r and r.paused_skip \
           and r.status = 'SKIPPED' and r.published_at is null \
           and s.schedule_id = r.schedule_id \
           and not exists (select 1 from schedule_skips sk \
                           where sk.schedule_id = r.schedule_id and sk.run_at = r.run_at)",
    )
    .bind(keys)
    .bind(run_ats)
    .bind(fire_ats)
    .bind(now)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Locks and returns up to `limit` paused schedules with a deadline whose `next_run_at` (the
/// first tick without a run) has come (`<= now`), earliest first, skipping rows another
/// transaction holds: two sweepers never write the same schedule's ticks at once, and the
/// caller moves `next_run_at` past the ticks it wrote (`crate::planning::advance`) in the
/// same transaction. One range of the partial index `schedules_paused_deadline`.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn claim_paused(
    db: impl PgExecutor<'_>,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<Schedule>> {
    crate::schedules::claim_where(
        db,
        "paused and deadline_s is not null and next_run_at is not null and next_run_at <= $1",
        "next_run_at",
        now,
        limit,
    )
    .await
}
