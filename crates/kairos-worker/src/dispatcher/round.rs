//! One dispatcher round over a claimed batch, from the claim's transaction on. It reads as
//! its steps: triage → record ahead what the next wave will launch (`stage.rs`) → then,
//! wave by wave as runs come due: restage (runs whose schedule was written meanwhile,
//! `restage.rs`) → decide → record the rest of the wave → commit → launch → acknowledge →
//! lock the runs still waiting again, and settle those whose skip waited for the launch.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use kairos_core::{OverlapPolicy, RunSource, RunStatus};
use kairos_launcher::RunLauncher;
use kairos_store::dispatch::waves::{self, Wave};
use kairos_store::dispatch::{
    self, Claimed, Outcome, RunSpan, Settled, Unlaunchable, WriteSnapshot,
};
use kairos_store::Tx;

use super::decide::{decide, Decision};
use super::decide_ahead::{self, DecidedAhead};
use super::release::Release;
use super::restage::restage;
use super::stage::Staged;
use super::{report, Dispatcher, Result};
use crate::crash::crash_point;
use crate::messages::Dags;
use crate::metrics::SkipReason;
use crate::priority::Launching;

/// What one round did, by outcome.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Round {
    /// Runs claimed.
    pub claimed: usize,
    /// Published and `ENQUEUED`.
    pub enqueued: usize,
    /// Left `PENDING` after a retryable launch error.
    pub retry: usize,
    /// Left `PENDING` because the launch stream of their region was not ready.
    pub held: usize,
    /// `FAILED` (permanent error or launch deadline).
    pub failed: usize,
    /// Of `failed`: the launch deadline had passed.
    pub failed_late: usize,
    /// Of `failed`: the workflow version is not stored.
    pub failed_no_workflow: usize,
    /// `SKIPPED` by overlap.
    pub skipped: usize,
    /// Of `skipped`: overlap `queue` with `max_queued` runs waiting.
    pub skipped_queue_full: usize,
    /// Of `skipped`: overlap `buffer_one`/`cancel_other` with a run waiting.
    pub skipped_buffer_full: usize,
    /// `QUEUED` by overlap.
    pub queued: usize,
    /// Left `PENDING` untouched (schedule held by another dispatcher, or behind a run of
    /// this batch that did not go out).
    pub deferred: usize,
    /// Fire drift of each planner tick enqueued: seconds from `run_at` to `published_at`
    /// (the database's clock after the PubAcks).
    pub drift_seconds: Vec<f64>,
    /// Runs in flight asked to cancel by overlap `cancel_other` (their cancel messages
    /// go out after the commit).
    pub cancels: usize,
    /// Runs cancelled before their wave because their schedule was paused, deleted or
    /// rescheduled while this round held them (not counted in `claimed`'s other fields).
    pub withdrawn: usize,
}

impl<L: RunLauncher> Dispatcher<L> {
    /// Decides, records and publishes the claimed runs, in waves: the runs due now go out
    /// at once, a pre-staged run when its `fire_at` comes. A wave's launches are recorded
    /// `ENQUEUED` (ahead of the tick where they can be, `stage.rs`) and committed before
    /// they are published, so a report never waits for the round that launched its run;
    /// the wave's rows in `launch_waves` cover a crash between that commit and the
    /// acknowledgements. The runs still waiting, and those whose skip or queue depends on
    /// this wave's publishes, are locked again in the next transaction
    /// (`next_transaction`). Commits the last one.
    pub(super) async fn dispatch(
        &self,
        mut tx: Tx,
        claimed: Vec<Claimed>,
        seen: &WriteSnapshot,
        release: Release,
    ) -> Result<Round> {
        let Some(span) = RunSpan::of(&claimed) else {
            return Ok(Round::default());
        };
        let claimed_n = claimed.len();
        let (claimed, held) = self.route(claimed);
        let mut dags = Dags::load(&mut tx, &claimed).await?;
        let (mut waiting, mut outcomes) = triage(claimed, &dags);
        outcomes.extend(held);
        dispatch::record(&mut tx, &outcomes, span, release.now()).await?;
        let mut drift = Vec::new();
        let (mut cancels, mut withdrawn, mut skips) = (0, 0, Vec::new());
        // Cancels asked in a transaction not committed yet: sent after its commit.
        let mut unsent_cancels = 0;
        let mut ahead = DecidedAhead::read(&mut tx, &waiting, &release).await?;
        let mut staged = Staged::record(&mut tx, &waiting, &ahead, &release, span).await?;
        while let Some(wave) = release.next_wave(&mut waiting).await {
            // This process's status intake steps aside until the wave is out.
            let launching = Launching::start();
            let (wave, gone) = restage(
                &mut tx,
                wave,
                &mut waiting,
                seen,
                release.now(),
                (&mut ahead, &mut staged, span),
            )
            .await?;
            withdrawn += gone;
            // A restaged run launches what its schedule launches now: maybe a version
            // deployed after the claim, whose DAG is loaded here (or which fails the run).
            dags.load_missing(&mut tx, &wave).await?;
            let (wave, unlaunchable) = triage(wave, &dags);
            if !unlaunchable.is_empty() {
                dispatch::record(&mut tx, &unlaunchable, span, release.now()).await?;
                outcomes.extend(unlaunchable);
            }
            staged.keep_alone_in(&mut tx, &wave, span).await?;
            if wave.is_empty() {
                continue;
            }
            let decisions = self
                .decide(&mut tx, &wave, std::mem::take(&mut ahead))
                .await?;
            staged
                .keep_launched(&mut tx, &wave, &decisions, span)
                .await?;
            let launches = launches(&wave, &decisions);
            let at_tick: Vec<(&Claimed, bool)> = launches
                .iter()
                .filter(|(run, _)| !staged.contains(run))
                .copied()
                .collect();
            waves::record_launches(&mut tx, &at_tick, span, release.now()).await?;
            let (settled, mut after, stood) = settle_now(&wave, &decisions);
            skips.extend(stood);
            dispatch::record(&mut tx, &settled, span, release.now()).await?;
            let asked = cancel_others(&mut tx, &wave, &decisions, &settled).await?;
            cancels += asked;
            outcomes.extend(settled);
            let named_at_tick: Vec<&Claimed> = at_tick.iter().map(|(run, _)| *run).collect();
            let mut opened: Vec<Wave> = staged.take_wave().into_iter().collect();
            opened.extend(waves::open(&mut tx, &named_at_tick).await?);
            crash_point("dispatcher_before_commit");
            tx.commit().await?;
            staged = Staged::default();
            crash_point("dispatcher_before_publish");
            self.cancels_asked(asked + std::mem::take(&mut unsent_cancels))
                .await;
            let launched = self.launch(&wave, &decisions, &dags, release.clock()).await;
            drop(launching);
            crash_point("dispatcher_after_ack");
            drift.extend(drift_of(&wave, &launched));
            if !opened.is_empty() {
                self.acknowledge(&opened, &wave, &launched).await?;
            }
            tx = self.next_transaction(&mut waiting, &mut after).await?;
            let (recorded, stood) = settle(&after, &launched);
            skips.extend(stood);
            dispatch::record(&mut tx, &recorded, span, release.now()).await?;
            let (after_runs, after_decisions): (Vec<Claimed>, Vec<Decision>) =
                after.into_iter().unzip();
            unsent_cancels =
                cancel_others(&mut tx, &after_runs, &after_decisions, &recorded).await?;
            cancels += unsent_cancels;
            outcomes.extend(launched);
            outcomes.extend(recorded);
            if !waiting.is_empty() {
                ahead = DecidedAhead::read(&mut tx, &waiting, &release).await?;
                staged = Staged::record(&mut tx, &waiting, &ahead, &release, span).await?;
            }
        }
        // A row written ahead for a wave that ended empty names no run left to publish.
        if let Some(unused) = staged.take_wave() {
            waves::close(&mut tx, &[unused]).await?;
        }
        tx.commit().await?;
        crash_point("dispatcher_after_commit");
        self.cancels_asked(unsent_cancels).await;
        let mut round = Round::tally(claimed_n - withdrawn, &outcomes, &skips, drift);
        round.claimed = claimed_n;
        round.cancels = cancels;
        round.withdrawn = withdrawn;
        Ok(round)
    }

    /// After a commit that asked runs in flight to cancel: their cancel messages (the sweep
    /// sends any this leaves).
    async fn cancels_asked(&self, asked: usize) {
        if asked == 0 {
            return;
        }
        if let Err(err) = self.send_cancels().await {
            tracing::warn!(error = %crate::error_chain(&err),
                "cancel messages not sent; the sweep sends them");
        }
    }

    /// Once a wave's publishes are all acknowledged (or timed out): the runs whose publish
    /// failed are put back and the wave's rows deleted, in a transaction of its own.
    async fn acknowledge(
        &self,
        opened: &[Wave],
        wave: &[Claimed],
        launched: &[Outcome],
    ) -> Result<()> {
        let by_key: HashMap<&str, &Claimed> = wave
            .iter()
            .map(|run| (run.idempotency_key.as_str(), run))
            .collect();
        let unsent: Vec<(&Claimed, &Outcome)> = launched
            .iter()
            .filter(|outcome| !matches!(outcome.settled(), Settled::Enqueued { .. }))
            .filter_map(|outcome| by_key.get(outcome.key()).map(|run| (*run, outcome)))
            .collect();
        waves::acknowledge(&self.pool, opened, &unsent).await?;
        Ok(())
    }

    /// A new transaction holding again what the round still needs: the runs `waiting` for a
    /// later wave, and those whose skip or queue waited for this wave's publishes (`after`).
    /// A run another transaction took or changed in between leaves the round (it is that
    /// one's now); the others come back with their `fire_at` and revision as stored.
    async fn next_transaction(
        &self,
        waiting: &mut Vec<Claimed>,
        after: &mut Vec<(Claimed, Decision)>,
    ) -> Result<Tx> {
        let mut tx = Tx::begin(&self.pool).await?;
        if waiting.is_empty() && after.is_empty() {
            return Ok(tx);
        }
        dispatch::bound_idle(&mut tx, self.config.claim_idle_timeout).await?;
        let mut all: Vec<Claimed> = waiting.clone();
        all.extend(after.iter().map(|(run, _)| run.clone()));
        let still = dispatch::relock(&mut tx, &all).await?;
        let keep = |run: &mut Claimed| match still.get(&run.idempotency_key) {
            Some(&(fire_at, revision)) => {
                run.fire_at = fire_at;
                run.revision = revision;
                true
            }
            None => false,
        };
        waiting.retain_mut(keep);
        after.retain_mut(|(run, _)| keep(run));
        Ok(tx)
    }

    /// The overlap decisions for `runs` (dispatch locks taken on their exclusive schedules,
    /// those taken `ahead` kept, and blockers read for every one not read clear ahead).
    async fn decide(
        &self,
        tx: &mut Tx,
        runs: &[Claimed],
        ahead: DecidedAhead,
    ) -> Result<Vec<Decision>> {
        let exclusive: HashSet<String> = runs
            .iter()
            .filter(|run| decide_ahead::exclusive(run))
            .map(|run| run.schedule_id.clone())
            .collect();
        let (mut held, mut blockers) = ahead.take(&exclusive);
        let lock: Vec<String> = exclusive.difference(&held).cloned().collect();
        held.extend(dispatch::lock_schedules(tx, &lock).await?);
        // The blockers of the schedules held here, and of those held elsewhere whose late
        // runs the policy decides now (`decide::busy`), but those read clear ahead.
        let mut read: HashSet<String> = held.clone();
        read.extend(
            runs.iter()
                .filter(|run| run.late)
                .map(|run| run.schedule_id.clone()),
        );
        let read: Vec<String> = read
            .into_iter()
            .filter(|id| !blockers.contains_key(id))
            .collect();
        blockers.extend(dispatch::blockers(tx, &read).await?);
        Ok(decide(runs, &held, &blockers))
    }
}

/// Under `cancel_other`, the run in flight of each schedule whose new run was queued is
/// asked to cancel, in this transaction (after the queued run is recorded, so a run that
/// held the schedule without being published, `RETRYING`, frees it for the new run at
/// once). Returns how many were asked.
async fn cancel_others(
    tx: &mut Tx,
    live: &[Claimed],
    decisions: &[Decision],
    outcomes: &[Outcome],
) -> Result<usize> {
    let queued: HashSet<&str> = outcomes
        .iter()
        .filter(|o| matches!(o.settled(), Settled::Queued { .. }))
        .map(Outcome::key)
        .collect();
    let mut asked = 0;
    for (run, decision) in live.iter().zip(decisions) {
        let Decision::Queue {
            cancel: Some(victim),
            ..
        } = decision
        else {
            continue;
        };
        if !queued.contains(run.idempotency_key.as_str()) {
            continue;
        }
        let reason = format!(
            "overlap cancel_other: run {} of the schedule is due",
            run.idempotency_key
        );
        let done = kairos_store::cancel::request(tx, victim, &reason, None).await?;
        tracing::info!(
            key = %victim,
            trace_id = %crate::trace_of(victim),
            by = %run.idempotency_key,
            outcome = done.kind(),
            "overlap cancel_other: cancel of the run in flight requested",
        );
        asked += 1;
    }
    Ok(asked)
}

/// Runs that must not go out fail first (launch deadline passed, workflow version not
/// stored), so they never block another run by overlap. Returns the live runs and those
/// outcomes. A late `PENDING` run of an exclusive schedule stays live: the decision fails it
/// only if its schedule was free (`Decision::Late`); one that waited for its schedule's
/// turn is queued or skipped by policy.
fn triage(claimed: Vec<Claimed>, dags: &Dags) -> (Vec<Claimed>, Vec<Outcome>) {
    let mut live = Vec::with_capacity(claimed.len());
    let mut failed = Vec::new();
    for run in claimed {
        let waits_for_its_turn =
            run.status == RunStatus::Pending && run.overlap_policy != OverlapPolicy::Allow;
        let why = if run.late && !waits_for_its_turn {
            Unlaunchable::LaunchDeadline
        } else if dags.get(&run).is_none() {
            Unlaunchable::WorkflowMissing {
                workflow_id: run.workflow_id.clone(),
                version: run.version,
            }
        } else {
            live.push(run);
            continue;
        };
        failed.push(Outcome::unlaunchable(&run.idempotency_key, why));
    }
    report::failed_early(&failed);
    (live, failed)
}

/// The runs a wave launches, each with whether it counts against its schedule's runs in
/// flight.
fn launches<'a>(wave: &'a [Claimed], decisions: &[Decision]) -> Vec<(&'a Claimed, bool)> {
    wave.iter()
        .zip(decisions)
        .filter_map(|(run, decision)| match decision {
            Decision::Launch { exclusive } => Some((run, *exclusive)),
            _ => None,
        })
        .collect()
}

/// Before a wave's publishes: the outcomes that do not depend on them (a skip or queue
/// behind runs already in flight, a late run failed), recorded with the wave's launches;
/// the runs whose skip or queue is behind runs of this very wave, with their decisions,
/// settled once the publishes are known (`settle`); and why each skip that stood was
/// counted.
fn settle_now(
    wave: &[Claimed],
    decisions: &[Decision],
) -> (Vec<Outcome>, Vec<(Claimed, Decision)>, Vec<SkipReason>) {
    let (mut now, mut after) = (Vec::new(), Vec::new());
    for (run, decision) in wave.iter().zip(decisions) {
        match decision {
            Decision::Skip { behind, .. } | Decision::Queue { behind, .. }
                if !behind.is_empty() =>
            {
                after.push((run.clone(), decision.clone()));
            }
            _ => now.push((run.clone(), decision.clone())),
        }
    }
    let (settled, skips) = settle(&now, &[]);
    (settled, after, skips)
}

/// The outcomes of the runs that were not launched, and why each skip that stood was
/// counted. A skip or queue behind a run of this batch stands only if that run went out
/// (is among the `launched` outcomes `ENQUEUED`); otherwise the run stays `PENDING`
/// untouched.
fn settle(runs: &[(Claimed, Decision)], launched: &[Outcome]) -> (Vec<Outcome>, Vec<SkipReason>) {
    let enqueued: HashSet<&str> = launched
        .iter()
        .filter(|o| matches!(o.settled(), Settled::Enqueued { .. }))
        .map(Outcome::key)
        .collect();
    let stands = |behind: &[String]| behind.iter().all(|key| enqueued.contains(key.as_str()));
    let (mut settled, mut skips) = (Vec::new(), Vec::new());
    for (run, decision) in runs {
        let key = run.idempotency_key.as_str();
        let outcome = match decision {
            Decision::Skip {
                why,
                reason,
                behind,
            } if stands(behind) => {
                skips.push(*why);
                Outcome::skipped(key, reason.clone())
            }
            Decision::Queue { reason, behind, .. } if stands(behind) => {
                Outcome::queued(key, reason.clone())
            }
            Decision::Late => {
                let failed = Outcome::unlaunchable(key, Unlaunchable::LaunchDeadline);
                report::failed_early(std::slice::from_ref(&failed));
                settled.push(failed);
                continue;
            }
            _ => continue,
        };
        report::settled(run, &outcome);
        settled.push(outcome);
    }
    (settled, skips)
}

/// The fire drift of each planner tick (first attempt) a wave's publishes enqueued: seconds
/// from its planned `run_at` to its own acknowledgement on the database's clock (negative
/// when a negative jitter let it out early). Manual, backfill and api runs have no planned
/// time to drift from; a run-launcher start has no clock to date its acknowledgements by.
fn drift_of(wave: &[Claimed], launched: &[Outcome]) -> Vec<f64> {
    let planned: HashMap<&str, DateTime<Utc>> = wave
        .iter()
        .filter(|run| run.source == RunSource::Schedule && run.attempt == 1)
        .map(|run| (run.idempotency_key.as_str(), run.run_at))
        .collect();
    launched
        .iter()
        .filter_map(|outcome| match outcome.settled() {
            Settled::Enqueued {
                published_at: Some(at),
                ..
            } => planned
                .get(outcome.key())
                .map(|run_at| (*at - *run_at).as_seconds_f64()),
            _ => None,
        })
        .collect()
}

impl Round {
    /// Counts the outcomes of a round that claimed `claimed` runs, its skips by why.
    fn tally(
        claimed: usize,
        outcomes: &[Outcome],
        skips: &[SkipReason],
        drift_seconds: Vec<f64>,
    ) -> Round {
        let mut round = Round {
            claimed,
            drift_seconds,
            deferred: claimed - outcomes.len(),
            ..Round::default()
        };
        for outcome in outcomes {
            match outcome.settled() {
                Settled::Enqueued { .. } => round.enqueued += 1,
                Settled::Retry { .. } => round.retry += 1,
                Settled::Held { .. } => round.held += 1,
                Settled::Refused { .. } => round.failed += 1,
                Settled::Unlaunchable(why) => {
                    round.failed += 1;
                    match why {
                        Unlaunchable::LaunchDeadline => round.failed_late += 1,
                        Unlaunchable::WorkflowMissing { .. } => round.failed_no_workflow += 1,
                    }
                }
                Settled::Skipped { .. } => round.skipped += 1,
                Settled::Queued { .. } => round.queued += 1,
            }
        }
        for why in skips {
            match why {
                SkipReason::QueueFull => round.skipped_queue_full += 1,
                SkipReason::BufferFull => round.skipped_buffer_full += 1,
                _ => {}
            }
        }
        round
    }
}
