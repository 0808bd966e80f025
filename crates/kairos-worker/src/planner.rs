//! The planner (docs/design.md §1): due schedules → `PENDING` run rows, on every instance, no
//! leader.
//!
//! One pass is one transaction: read the database clock, claim up to `batch_size` schedules
//! with `next_run_at <= now + lookahead` (`for update skip locked`), decide each one with
//! [`kairos_core::plan`] (grace, catch-up, `max_catchup`, jitter, window), insert every run of
//! the batch in one statement (`on conflict do nothing`) and advance every schedule in one
//! statement, then commit. A planner killed anywhere before the commit leaves nothing behind
//! and releases its locks; the next pass plans the same ticks with the same keys.
//!
//! A schedule with a deadline (`deadline_s`) also gets a `SKIPPED` run for each missed tick
//! its catch-up policy drops (the newest `kairos_core::MAX_DROPPED_KEPT` per pass), so the
//! sweep marks those ticks late too; a run it plans for a tick the sweep wrote `SKIPPED`
//! while the schedule was paused takes that row over (`batch.rs`).
//!
//! A schedule paused until a time (`paused_until`) that has come is resumed at the start of
//! a pass, in its transaction, by the registrar's resume (`resume_ended_pauses`).
//!
//! Time: "now" is only ever the database's (`kairos_store::now`, or the pinned value in
//! tests), invariant "the database clock decides". The only use of the instance's clock is
//! the *length* of the sleep between passes (a monotonic duration), which can make a pass
//! earlier or later but never changes what a pass decides.
//!
//! Exclusions, named calendars, `roll` and the DST policy are applied inside the core's
//! `Timetable`; the calendars a batch names are loaded in one statement per pass.
//!
//! A schedule whose stored spec or zone no longer parses (only possible after a
//! core change), or that names a calendar that is gone, is *parked*: `next_run_at` NULL and `planner_error` set, logged once, so it
//! cannot wedge the loop. A registrar write of a new spec un-parks it.

mod batch;

use std::future::Future;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use kairos_core::{PlanParams, RunSource};
use kairos_store::calendars;
use kairos_store::planning;
use kairos_store::unlaunched;
use kairos_store::wakeups::{self, SCHEDULES_CHANNEL};
use kairos_store::{PgPool, Tx};

use batch::{named_calendars, plan_batch};

use crate::crash::crash_point;
use crate::wake::Wake;

/// The planner's knobs (from `[scheduler]`). No `Default`: every caller states them.
#[derive(Debug, Clone)]
pub struct PlannerConfig {
    /// Longest sleep between passes (`tick_ms`): bounds how late an edit or a lost wake-up
    /// is noticed.
    pub tick: StdDuration,
    /// How far ahead of the database's now runs are written (`lookahead_ms`).
    pub lookahead: Duration,
    /// How late a tick may be and still fire normally (`misfire_grace_ms`).
    pub misfire_grace: Duration,
    /// Newest missed ticks a schedule may catch up on (`max_catchup`).
    pub max_catchup: u32,
    /// Catch-up runs per schedule per pass (`max_catchup_per_tick`).
    pub max_catchup_per_pass: u32,
    /// Schedules claimed per pass (`batch_size`).
    pub batch_size: u32,
    /// A pass wakes the dispatchers only when it wrote a run due within this of the
    /// database's now. A dispatcher claims runs `prestage_ms` ahead of their `fire_at` and
    /// claims again at most `max(tick_ms, prestage_ms)` later whatever happens, so a run
    /// due after their sum is claimed with its whole lead without a wake-up; the runs a
    /// pass writes at the end of its lookahead are such runs. A wake-up makes each
    /// dispatcher claim from the oldest due run on.
    pub wake_within: Duration,
    /// Fixes the database "now" (tests only); `None` in production.
    pub pinned_now: Option<DateTime<Utc>>,
}

/// Why a planner call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database failed; the pass's transaction was rolled back.
    #[error("planner store call failed")]
    Store(#[from] kairos_store::Error),
    /// Resuming a schedule whose pause ended failed; the pass was rolled back.
    #[error("resuming a schedule whose pause ended failed")]
    Resume(#[from] kairos_registrar::Error),
}

/// Result of planner calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What one pass did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassReport {
    /// The database's now (or the pinned one) the pass decided with.
    pub now: DateTime<Utc>,
    /// Schedules claimed.
    pub claimed: usize,
    /// Runs the plans asked for.
    pub planned: usize,
    /// Runs actually written (the rest existed already).
    pub inserted: u64,
    /// Missed ticks counted (not fired).
    pub missed: u64,
    /// Runs written for ticks older than the misfire grace (catch-up `fire_immediately` or
    /// `spread`).
    pub caught_up: u64,
    /// Schedules parked because their stored spec no longer parses.
    pub parked: usize,
}

/// The planner over one pool. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Planner {
    pool: PgPool,
    config: PlannerConfig,
}

impl Planner {
    /// A planner claiming from `pool`.
    pub fn new(pool: PgPool, config: PlannerConfig) -> Planner {
        Planner { pool, config }
    }

    /// Runs passes until `shutdown` resolves: a full batch is followed at once by another,
    /// otherwise it sleeps until the earliest schedule becomes due, at most `tick`, or until
    /// a schedule write wakes it (LISTEN). Shutdown is checked between passes, so the
    /// in-flight batch is always finished (committed or rolled back), never abandoned.
    ///
    /// # Errors
    /// None so far: database failures are logged and retried after `tick`.
    #[tracing::instrument(name = "planner", skip_all)]
    pub async fn run(&self, shutdown: impl Future<Output = ()>) -> Result<()> {
        tokio::pin!(shutdown);
        let mut wake = Wake::new(SCHEDULES_CHANNEL, "planner");
        tracing::info!(batch_size = self.config.batch_size, "planner started");
        loop {
            wake.ensure(&self.pool).await;
            let pause = self.tick().await;
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                () = tokio::time::sleep(pause) => {}
                () = wake.next() => {}
            }
        }
        tracing::info!("planner stopped; its last pass committed, no claims held");
        Ok(())
    }

    /// One pass, then how long to wait before the next.
    async fn tick(&self) -> StdDuration {
        let pass = self.pass().await;
        if pass.is_ok() {
            crate::outage::answered("planner");
        }
        match pass {
            Ok(report) if report.claimed >= self.config.batch_size as usize => StdDuration::ZERO,
            Ok(_) => match self.idle_for().await {
                Ok(pause) => pause,
                Err(err) => log_failure(&err, self.config.tick),
            },
            Err(err) => log_failure(&err, self.config.tick),
        }
    }

    /// Plans one batch of due schedules in one transaction (see the module docs).
    ///
    /// # Errors
    /// [`Error::Store`]; nothing was written.
    pub async fn pass(&self) -> Result<PassReport> {
        let started = crate::metrics::BatchTimer::start();
        let mut tx = Tx::begin(&self.pool).await?;
        let now = kairos_store::now(&mut *tx, self.config.pinned_now).await?;
        let limit = i64::from(self.config.batch_size);
        // Pauses that have ended resume first, in this transaction, so this pass's claim
        // already plans them (from their `paused_until`, with their catch-up policy).
        let resumed = kairos_registrar::resume_ended_pauses(&mut tx, now, limit).await?;
        let due = planning::claim_due(&mut tx, now + self.config.lookahead, limit).await?;
        crash_point("planner_after_claim");
        if due.is_empty() {
            tx.commit().await?;
            resumed.iter().for_each(kairos_registrar::Resumed::record);
            return Ok(PassReport::empty(now));
        }
        // The calendars the whole batch names, in one statement (O(batch), not per schedule).
        let mut names: Vec<String> = due
            .iter()
            .flat_map(|s| s.rules.exclude_calendars.iter().cloned())
            .collect();
        names.sort();
        names.dedup();
        let calendars = named_calendars(calendars::dates_of(&mut *tx, &names).await?);
        let batch = plan_batch(&due, &calendars, self.params(now));
        // Schedules with a deadline only: a tick's run written `SKIPPED` while its schedule
        // was paused becomes the run planned now, and dropped missed ticks are written
        // `SKIPPED` (late once their deadline passes). Both are empty for the rest.
        let revivable = &batch.revivable;
        let revived = unlaunched::revive_paused(
            &mut *tx,
            &revivable.keys,
            &revivable.run_ats,
            &revivable.fire_ats,
            now,
        )
        .await?;
        let inserted = planning::insert_runs(&mut *tx, &batch.runs, RunSource::Schedule, None, now)
            .await?
            + revived;
        unlaunched::insert_skipped(&mut *tx, &batch.dropped, false, now).await?;
        planning::advance(&mut *tx, &batch.advances).await?;
        let soon = now + self.config.wake_within;
        let due_soon = batch.runs.fire_ats.iter().any(|at| *at <= soon)
            || revivable.fire_ats.iter().any(|at| *at <= soon);
        if inserted > 0 && due_soon {
            // A run may be due before the time a dispatcher went to sleep until.
            wakeups::runs_due(&mut *tx).await?;
        }
        crash_point("planner_before_commit");
        tx.commit().await?;
        resumed.iter().for_each(kairos_registrar::Resumed::record);
        let report = PassReport {
            now,
            claimed: due.len(),
            planned: batch.runs.len(),
            inserted,
            missed: batch.missed,
            caught_up: batch.catchups.iter().map(|c| c.caught_up).sum(),
            parked: batch.parked,
        };
        // Logged after the commit: a rolled-back pass decided nothing.
        for catchup in &batch.catchups {
            catchup.log();
        }
        tracing::debug!(
            claimed = report.claimed,
            inserted = report.inserted,
            missed = report.missed,
            caught_up = report.caught_up,
            "planner pass"
        );
        report.record(started.elapsed());
        Ok(report)
    }

    fn params(&self, now: DateTime<Utc>) -> PlanParams {
        PlanParams {
            now,
            lookahead: self.config.lookahead,
            misfire_grace: self.config.misfire_grace,
            max_catchup: self.config.max_catchup,
            max_catchup_per_pass: self.config.max_catchup_per_pass,
        }
    }

    /// How long until the earliest schedule is due (`next_run_at - lookahead - now`, all
    /// database times) or the earliest pause ends, clamped to `[tick / 4, tick]`. The floor keeps a planner from
    /// spinning on schedules another planner holds locked.
    async fn idle_for(&self) -> Result<StdDuration> {
        let now = kairos_store::now(&self.pool, self.config.pinned_now).await?;
        let floor = self.config.tick / 4;
        let next_run = planning::earliest_next_run(&self.pool).await?;
        let pause_end = kairos_store::pauses::earliest_pause_end(&self.pool).await?;
        let earliest = match (next_run.map(|at| at - self.config.lookahead), pause_end) {
            (Some(due), Some(end)) => due.min(end),
            (Some(at), None) | (None, Some(at)) => at,
            (None, None) => return Ok(self.config.tick),
        };
        let until_due = (earliest - now).to_std().unwrap_or(StdDuration::ZERO);
        Ok(until_due.clamp(floor, self.config.tick))
    }
}

impl PassReport {
    fn empty(now: DateTime<Utc>) -> PassReport {
        PassReport {
            now,
            claimed: 0,
            planned: 0,
            inserted: 0,
            missed: 0,
            caught_up: 0,
            parked: 0,
        }
    }

    /// The pass's metrics (a pass that claimed nothing records nothing).
    fn record(&self, elapsed: StdDuration) {
        if self.claimed == 0 {
            return;
        }
        crate::metrics::pass_duration(elapsed);
        crate::metrics::planned(self.inserted);
        if self.missed > 0 {
            crate::metrics::skipped(crate::metrics::SkipReason::Missed, self.missed);
        }
    }
}

fn log_failure(err: &Error, retry_in: StdDuration) -> StdDuration {
    if !crate::outage::failed("planner", err) {
        tracing::error!(error = %crate::error_chain(err), retry_ms = retry_in.as_millis() as u64, "planner pass failed");
    }
    retry_in
}
