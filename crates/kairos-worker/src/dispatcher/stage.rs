//! Recording ahead: while a round waits for a pre-staged wave's tick, it records `ENQUEUED`
//! the runs of that wave whose decision nothing but a schedule write can change before the
//! tick, in its open transaction, with the row of `launch_waves` that names them. No one
//! sees them before the round commits at the tick, so the contract holds (a run is
//! `ENQUEUED` when its launch goes out), and at the tick the round's costliest statements
//! are already done: it commits and publishes.
//!
//! A run is recorded ahead when it is `PENDING`, not past its launch deadline, the only run
//! of its schedule in the round, and goes out whatever happens before the tick: overlap
//! `allow`, or an exclusive schedule locked and read clear ahead (`ahead.rs`). At the tick,
//! a run whose schedule was written since the claim, that left the wave, or that the tick's
//! decision does not launch as recorded is taken back to `PENDING` before anything else is
//! written for it. While the record runs, this process's status intake steps aside
//! (`crate::priority`).

use std::collections::{HashMap, HashSet};

use kairos_core::{OverlapPolicy, RunStatus};
use kairos_store::dispatch::waves::{self, Wave};
use kairos_store::dispatch::{Claimed, RunSpan};
use kairos_store::Tx;

use super::decide::{decide, Decision};
use super::decide_ahead::{self, DecidedAhead};
use super::release::Release;
use super::Result;
use crate::priority::Launching;

/// The runs a round recorded `ENQUEUED` ahead of its next wave's tick, by key: each run as
/// claimed, and whether it counts against its schedule's runs in flight; and the row of
/// `launch_waves` naming them. A run taken back stays named there: the sweeper republishes
/// only runs still `ENQUEUED`.
#[derive(Debug, Default)]
pub(super) struct Staged {
    runs: HashMap<String, (Claimed, bool)>,
    wave: Option<Wave>,
}

/// How many of `runs` each schedule has.
fn per_schedule(runs: &[Claimed]) -> HashMap<&str, usize> {
    let mut count: HashMap<&str, usize> = HashMap::new();
    for run in runs {
        *count.entry(run.schedule_id.as_str()).or_default() += 1;
    }
    count
}

impl Staged {
    /// Records ahead the runs of the next wave of `waiting` that qualify (see the module's
    /// summary), when that wave is pre-staged. Nothing otherwise.
    pub(super) async fn record(
        tx: &mut Tx,
        waiting: &[Claimed],
        ahead: &DecidedAhead,
        release: &Release,
        span: RunSpan,
    ) -> Result<Staged> {
        let Some(first) = waiting.iter().map(|run| run.fire_at).min() else {
            return Ok(Staged::default());
        };
        if !decide_ahead::prestaged(first, release) {
            return Ok(Staged::default());
        }
        let per_schedule = per_schedule(waiting);
        let candidates: Vec<Claimed> = waiting
            .iter()
            .filter(|run| {
                run.fire_at <= first
                    && run.status == RunStatus::Pending
                    && !run.late
                    && !run.stale_at_claim()
                    && per_schedule.get(run.schedule_id.as_str()) == Some(&1)
                    && (run.overlap_policy == OverlapPolicy::Allow
                        || ahead.is_clear(&run.schedule_id))
            })
            .cloned()
            .collect();
        let (held, blockers) = ahead.view();
        let decisions = decide(&candidates, held, blockers);
        let launches: Vec<(&Claimed, bool)> = candidates
            .iter()
            .zip(&decisions)
            .filter_map(|(run, decision)| match decision {
                Decision::Launch { exclusive } => Some((run, *exclusive)),
                _ => None,
            })
            .collect();
        if launches.is_empty() {
            return Ok(Staged::default());
        }
        let launching = Launching::start();
        waves::record_launches(tx, &launches, span, release.now()).await?;
        let named: Vec<&Claimed> = launches.iter().map(|(run, _)| *run).collect();
        let wave = waves::open(tx, &named).await?;
        drop(launching);
        let runs = launches
            .into_iter()
            .map(|(run, exclusive)| (run.idempotency_key.clone(), (run.clone(), exclusive)))
            .collect();
        Ok(Staged { runs, wave })
    }

    /// The row of `launch_waves` naming the runs recorded ahead, handed to the wave that
    /// publishes them (it is acknowledged with that wave).
    pub(super) fn take_wave(&mut self) -> Option<Wave> {
        self.wave.take()
    }

    /// Whether `run` was recorded ahead.
    pub(super) fn contains(&self, run: &Claimed) -> bool {
        self.runs.contains_key(&run.idempotency_key)
    }

    /// Takes back the runs of the schedules in `written` (written since the claim: what was
    /// read ahead of them no longer holds, and the run may be restaged).
    pub(super) async fn take_back_written(
        &mut self,
        tx: &mut Tx,
        written: &HashSet<String>,
        span: RunSpan,
    ) -> Result<()> {
        self.take_back(tx, span, |run, _| written.contains(&run.schedule_id))
            .await
            .map(drop)
    }

    /// Before the tick's decisions: takes back the runs that left the wave, and those that
    /// now share their schedule with another run of it (their decision would depend on it).
    pub(super) async fn keep_alone_in(
        &mut self,
        tx: &mut Tx,
        wave: &[Claimed],
        span: RunSpan,
    ) -> Result<()> {
        let per_schedule = per_schedule(wave);
        let in_wave: HashSet<&str> = wave
            .iter()
            .map(|run| run.idempotency_key.as_str())
            .collect();
        self.take_back(tx, span, |run, _| {
            !in_wave.contains(run.idempotency_key.as_str())
                || per_schedule.get(run.schedule_id.as_str()) != Some(&1)
        })
        .await
        .map(drop)
    }

    /// After the tick's decisions: takes back every run recorded ahead that the tick does not
    /// launch exactly as recorded (only a schedule write could cause it, and those were taken
    /// back before; this keeps the record true whatever the cause).
    pub(super) async fn keep_launched(
        &mut self,
        tx: &mut Tx,
        wave: &[Claimed],
        decisions: &[Decision],
        span: RunSpan,
    ) -> Result<()> {
        let decided: HashMap<&str, &Decision> = wave
            .iter()
            .map(|run| run.idempotency_key.as_str())
            .zip(decisions)
            .collect();
        let taken = self
            .take_back(tx, span, |run, exclusive| {
                decided
                    .get(run.idempotency_key.as_str())
                    .is_some_and(|decision| **decision != Decision::Launch { exclusive })
            })
            .await?;
        if taken > 0 {
            tracing::warn!(
                runs = taken,
                "runs recorded ahead of their tick were decided otherwise at it; taken back"
            );
        }
        Ok(())
    }

    /// Takes back (to `PENDING`, in `tx`) and forgets the runs recorded ahead for which
    /// `which(run, exclusive)` holds. Returns how many.
    async fn take_back(
        &mut self,
        tx: &mut Tx,
        span: RunSpan,
        which: impl Fn(&Claimed, bool) -> bool,
    ) -> Result<usize> {
        let keys: Vec<String> = self
            .runs
            .iter()
            .filter(|(_, (run, exclusive))| which(run, *exclusive))
            .map(|(key, _)| key.clone())
            .collect();
        if keys.is_empty() {
            return Ok(0);
        }
        let runs: Vec<Claimed> = keys
            .iter()
            .filter_map(|key| self.runs.remove(key).map(|(run, _)| run))
            .collect();
        let runs: Vec<&Claimed> = runs.iter().collect();
        waves::take_back(tx, &runs, span).await?;
        Ok(runs.len())
    }
}
