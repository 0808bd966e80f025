//! Deciding ahead: the dispatch locks and blockers of a pre-staged wave's exclusive
//! schedules, taken while the round waits for the wave's tick instead of at it.
//!
//! At a burst's tick every round of every instance decides at once; for exclusive schedules
//! deciding means two statements over every schedule of the wave (its lock, then what it has
//! in flight or queued) before the first publish. So, ahead of the tick:
//! - a clear schedule (nothing in flight, nothing queued, no `PENDING` run due before the
//!   wave) is locked, and its blockers read again under the lock. Clear then, it stays
//!   clear until the tick: only a dispatcher holding its lock moves one of its runs in
//!   flight or to `QUEUED`. A write to it since the claim (restaged at the tick) drops what
//!   was read ahead;
//! - any other schedule is left to be locked and read at the tick. Holding its
//!   lock until then would hold back what may go out meanwhile: a queued run released, an
//!   earlier run another round holds.
//!
//! A run that becomes due for a schedule locked ahead (a trigger, a chain) waits for the
//! wave's tick, at most the pre-staging lead, and is decided after it.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use kairos_core::{OverlapPolicy, RunStatus};
use kairos_store::dispatch::{self, Blockers, Claimed};
use kairos_store::Tx;

use super::release::Release;
use super::Result;

/// A wave due sooner than this is decided at once, at its tick: deciding ahead would gain
/// nothing and cost a statement.
const AHEAD_MIN: Duration = Duration::from_millis(200);

/// What a round took and read before its next wave's tick.
#[derive(Debug, Default)]
pub(super) struct DecidedAhead {
    /// Exclusive schedules whose dispatch lock the round's transaction took ahead.
    held: HashSet<String>,
    /// Of `held`: those still clear when read again under the lock (nearly all).
    clear: HashMap<String, Blockers>,
}

impl DecidedAhead {
    /// Forgets the blockers read ahead for schedules written since the claim: their runs
    /// are restaged, and their limits read again at the tick.
    pub(super) fn forget(&mut self, written: &HashSet<String>) {
        self.clear.retain(|id, _| !written.contains(id));
    }

    /// Of the wave's `exclusive` schedules: those locked ahead, and the blockers read ahead
    /// that still stand.
    pub(super) fn take(
        self,
        exclusive: &HashSet<String>,
    ) -> (HashSet<String>, HashMap<String, Blockers>) {
        let held = self.held.intersection(exclusive).cloned().collect();
        let clear = self
            .clear
            .into_iter()
            .filter(|(id, _)| exclusive.contains(id))
            .collect();
        (held, clear)
    }
}

impl DecidedAhead {
    /// Whether the schedule `id` was locked and read clear ahead, and still stands so.
    pub(super) fn is_clear(&self, id: &str) -> bool {
        self.clear.contains_key(id)
    }

    /// What was taken and read ahead, as `decide` takes them: the schedules held, and the
    /// blockers of those read clear.
    pub(super) fn view(&self) -> (&HashSet<String>, &HashMap<String, Blockers>) {
        (&self.held, &self.clear)
    }
}

/// Whether a wave due at `first` is pre-staged: due at least [`AHEAD_MIN`] from now on the
/// database's clock, so there is time to prepare it before its tick.
pub(super) fn prestaged(first: DateTime<Utc>, release: &Release) -> bool {
    match release {
        Release::WhenDue(clock) => {
            first - clock.now() >= TimeDelta::from_std(AHEAD_MIN).unwrap_or_default()
        }
        Release::Now(_) => false,
    }
}

/// Whether `run` is decided with its schedule's dispatch lock (`round.rs`, `decide`).
pub(super) fn exclusive(run: &Claimed) -> bool {
    run.overlap_policy != OverlapPolicy::Allow || run.exclusive
}

impl DecidedAhead {
    /// Locks and reads ahead, in the round's `tx`, the exclusive schedules of the next wave
    /// of `waiting` (the runs due at the earliest `fire_at`), when that wave is pre-staged:
    /// due at least [`AHEAD_MIN`] from now on the database's clock. Nothing otherwise.
    pub(super) async fn read(
        tx: &mut Tx,
        waiting: &[Claimed],
        release: &Release,
    ) -> Result<DecidedAhead> {
        let Some(first) = waiting.iter().map(|run| run.fire_at).min() else {
            return Ok(DecidedAhead::default());
        };
        if !prestaged(first, release) {
            return Ok(DecidedAhead::default());
        }
        // A `RETRYING` run holds its schedule already: it is never clear, so it is locked
        // at the tick like any run decided there.
        let ids: HashSet<&str> = waiting
            .iter()
            .filter(|run| run.fire_at <= first && run.status == RunStatus::Pending)
            .filter(|run| exclusive(run))
            .map(|run| run.schedule_id.as_str())
            .collect();
        let ids: Vec<String> = ids.into_iter().map(str::to_string).collect();
        let held = dispatch::lock_ahead(tx, &ids, first).await?;
        let read: Vec<String> = held.iter().cloned().collect();
        let clear = dispatch::blockers(tx, &read)
            .await?
            .into_iter()
            .filter(|(_, blockers)| blockers.clear())
            .collect();
        Ok(DecidedAhead { held, clear })
    }
}
