//! The dispatcher's loop: a claimer that takes a batch whenever a lane is free, and the held
//! rounds (each its own transaction on its batch) that publish and record them, side by side.
//!
//! A burst larger than one batch is claimed ahead in several batches (side by side, once a
//! claim comes back full), each held by its own round until its runs' `fire_at` comes: the
//! claims of a whole burst (and its DAGs) are done before its tick, and at the tick the
//! rounds publish together on the instance's one NATS connection. The last free lane claims
//! only runs already due, so a run due now (trigger-now, a release from `QUEUED`, a retry)
//! never waits behind pre-staged batches for longer than a round. While rounds are held the
//! claimer claims again only when they are all done, a wake-up comes or the pre-staging
//! lead has passed: a claim walks past every run another round holds locked, and at a
//! burst's tick that is the whole burst.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use futures::channel::mpsc;
use futures::future::join_all;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use kairos_launcher::RunLauncher;
use kairos_store::dispatch::{self, Claimed};
use kairos_store::Tx;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::clock::DbClock;
use super::floor::ClaimFloor;
use super::release::Release;
use super::{Dispatcher, Result, Round, MIN_IDLE};
use crate::metrics::BatchTimer;

/// A claimed batch, its locks held by its open transaction until its round commits.
pub(super) struct Held {
    tx: Tx,
    claimed: Vec<Claimed>,
    /// What the claim had seen of schedule writes.
    seen: dispatch::WriteSnapshot,
    clock: DbClock,
    started: BatchTimer,
    /// The lane it occupies; freed when the round ends, whatever its outcome.
    lane: Option<OwnedSemaphorePermit>,
}

/// What the claimer found when it last claimed.
#[derive(Debug, Clone, Copy)]
enum Claim {
    /// Every batch came back full and no lane is free for more: runs may wait behind them,
    /// so a round that frees a lane is a reason to claim.
    Full,
    /// A batch came back short: every run due by `due_by` that no round holds was claimed,
    /// so the next one worth a claim comes after it, within `lead`.
    Short {
        due_by: DateTime<Utc>,
        lead: Duration,
    },
    /// A claim failed, or no lane was free: claim again after a tick.
    Retry,
}

impl Claim {
    /// The first claim that was not full, of `self` then `next` (in lane order).
    fn and(self, next: Claim) -> Claim {
        match self {
            Claim::Full => next,
            found => found,
        }
    }
}

/// The claimer's pace between claims.
struct Pace {
    /// Whether the last claim came back full.
    full: bool,
    /// When to claim next, if nothing comes first.
    next: tokio::time::Instant,
}

impl<L: RunLauncher> Dispatcher<L> {
    /// Runs the claimer and the held rounds until `shutdown`; rounds already claimed finish
    /// (publish, record, commit) before this returns.
    pub(super) async fn run_lanes(&self, shutdown: impl std::future::Future<Output = ()>) {
        let lanes = Arc::new(Semaphore::new(self.config.lanes.max(1)));
        let (held_tx, held_rx) = mpsc::unbounded::<Held>();
        let (done_tx, mut done_rx) = mpsc::unbounded::<bool>();
        let rounds = self.hold_rounds(held_rx, done_tx);
        let claimer = async move {
            tokio::pin!(shutdown);
            let mut wake =
                crate::wake::Wake::new(kairos_store::wakeups::RUNS_CHANNEL, "dispatcher");
            let mut pace = Pace {
                full: false,
                next: tokio::time::Instant::now(),
            };
            let mut floor = ClaimFloor::new(self.config.tick.max(self.config.prestage));
            // Claim at the top of the loop: at start, when the next run comes within the
            // lead, on a wake-up, and when a round frees a lane while more runs wait. Only
            // a claim the pace asks for starts after the last short claim's due_by.
            let mut claim = true;
            let mut paced = false;
            loop {
                wake.ensure(&self.pool).await;
                if claim {
                    let after = if paced { floor.for_paced_claim() } else { None };
                    let found = self
                        .claim_while_free(&lanes, &held_tx, pace.full, after)
                        .await;
                    let short_by = match found {
                        Claim::Short { due_by, .. } => Some(due_by),
                        Claim::Full | Claim::Retry => None,
                    };
                    floor.claimed(after, short_by);
                    pace = self.pace_after(found, &lanes).await;
                }
                (claim, paced) = tokio::select! {
                    biased;
                    () = &mut shutdown => break,
                    Some(backoff) = done_rx.next() => {
                        if backoff {
                            floor.reset();
                        }
                        (self.claim_after_round(backoff, &lanes, &mut pace), false)
                    }
                    () = wake.next() => (true, false),
                    () = tokio::time::sleep_until(pace.next) => (true, true),
                };
            }
            // Dropping the sender ends the rounds' stream once the held rounds finish.
            drop(held_tx);
        };
        tokio::join!(claimer, rounds);
    }

    /// The pace after a claim found `found`: claim again once its next run comes within
    /// the lead, or after a tick.
    async fn pace_after(&self, found: Claim, lanes: &Semaphore) -> Pace {
        let wait = match found {
            Claim::Full | Claim::Retry => self.config.tick,
            Claim::Short { due_by, lead } => self.until_next_due(due_by, lead, lanes).await,
        };
        Pace {
            full: matches!(found, Claim::Full),
            next: tokio::time::Instant::now() + wait,
        }
    }

    /// Whether a finished round is a reason to claim now: more runs may wait behind a full
    /// claim, and this instance's rounds are all done (a claim walks past every run a round
    /// still holds, and at a burst's tick that is the burst). A round that could not
    /// publish (NATS down) holds the claimer off for a tick instead.
    fn claim_after_round(&self, backoff: bool, lanes: &Semaphore, pace: &mut Pace) -> bool {
        if backoff {
            pace.next = tokio::time::Instant::now() + self.config.tick;
        }
        let idle = lanes.available_permits() == self.config.lanes.max(1);
        pace.full && idle && !backoff
    }

    /// Runs every batch that comes in on `held` as its own round, side by side, and says on
    /// `done` whether each finished round asks the claimer to back off; ends once `held` is
    /// closed and every round has finished.
    async fn hold_rounds(
        &self,
        mut held: mpsc::UnboundedReceiver<Held>,
        done: mpsc::UnboundedSender<bool>,
    ) {
        let mut running = FuturesUnordered::new();
        let mut open = true;
        while open || !running.is_empty() {
            tokio::select! {
                next = held.next(), if open => match next {
                    Some(batch) => running.push(self.finish_logged(batch)),
                    None => open = false,
                },
                Some(backoff) = running.next(), if !running.is_empty() => {
                    let _ = done.unbounded_send(backoff);
                }
            }
        }
    }

    /// Claims batches while a lane is free and every claim comes back full (`full`: the
    /// last one did); each batch goes to its own round. The first claims only runs due
    /// after `after` when given (see [`ClaimFloor`]), the rest every due run.
    async fn claim_while_free(
        &self,
        lanes: &Arc<Semaphore>,
        held_tx: &mpsc::UnboundedSender<Held>,
        mut full: bool,
        mut after: Option<DateTime<Utc>>,
    ) -> Claim {
        loop {
            let claims = self.free_lanes(lanes, full);
            if claims.is_empty() {
                return if full { Claim::Full } else { Claim::Retry };
            }
            let batches = join_all(
                claims
                    .iter()
                    .map(|(_, lead)| self.claim_batch(*lead, after)),
            )
            .await;
            after = None;
            let mut found = Claim::Full;
            for ((lane, lead), batch) in claims.into_iter().zip(batches) {
                found = found.and(self.hand_over(lane, lead, batch, lanes, held_tx));
            }
            if !matches!(found, Claim::Full) {
                return found;
            }
            full = true;
        }
    }

    /// The lanes to claim in now, each with its lead: one at a time until a claim comes
    /// back full (`full`); then every free lane at once, so a burst's batches are claimed
    /// side by side before its tick.
    fn free_lanes(
        &self,
        lanes: &Arc<Semaphore>,
        full: bool,
    ) -> Vec<(OwnedSemaphorePermit, Duration)> {
        let width = if full { lanes.available_permits() } else { 1 };
        let mut claims = Vec::with_capacity(width);
        while claims.len() < width {
            let Ok(lane) = lanes.clone().try_acquire_owned() else {
                break;
            };
            // The last free lane of several keeps to runs already due (see the module
            // doc), unless the last claim was full: then a backlog is being claimed in
            // priority order, and a run due now waits its turn in it anyway.
            let last = lanes.available_permits() == 0 && self.config.lanes > 1 && !full;
            let lead = if last {
                Duration::ZERO
            } else {
                self.config.prestage
            };
            claims.push((lane, lead));
        }
        claims
    }

    /// Hands a claimed batch to its round in `lane`; what the claim found.
    fn hand_over(
        &self,
        lane: OwnedSemaphorePermit,
        lead: Duration,
        batch: Result<(DateTime<Utc>, Option<Held>)>,
        lanes: &Semaphore,
        held_tx: &mpsc::UnboundedSender<Held>,
    ) -> Claim {
        let (due_by, held) = match batch {
            Ok(claim) => claim,
            Err(err) => {
                if !crate::outage::failed("dispatcher", &err) {
                    tracing::error!(error = %crate::error_chain(&err), "dispatch claim failed");
                }
                return Claim::Retry;
            }
        };
        let Some(held) = held else {
            return Claim::Short { due_by, lead };
        };
        let full = held.claimed.len() as i64 >= self.config.batch_size;
        tracing::debug!(
            claimed = held.claimed.len(),
            lead_ms = lead.as_millis() as u64,
            free_lanes = lanes.available_permits(),
            "batch claimed"
        );
        if held_tx.unbounded_send(held.in_lane(lane)).is_err() {
            return Claim::Retry;
        }
        if full {
            Claim::Full
        } else {
            Claim::Short { due_by, lead }
        }
    }

    /// Opens a transaction and claims a batch of runs due within `lead` of the database's
    /// now (`due_by`, returned), and after `after` when given; no batch (the transaction
    /// rolled back) when nothing is.
    ///
    /// # Errors
    /// [`super::Error::Store`] when a statement fails.
    pub(super) async fn claim_batch(
        &self,
        lead: Duration,
        after: Option<DateTime<Utc>>,
    ) -> Result<(DateTime<Utc>, Option<Held>)> {
        let started = BatchTimer::start();
        let mut tx = Tx::begin(&self.pool).await?;
        dispatch::bound_idle(&mut tx, self.config.claim_idle_timeout).await?;
        let now = kairos_store::now(&mut *tx, None).await?;
        let clock = DbClock::measured(self.config.instance_clock, now);
        let due_by = now + TimeDelta::from_std(lead).unwrap_or_default();
        let deadline = self.config.launch_deadline.as_secs_f64();
        let limit = self.config.batch_size;
        let seen = dispatch::write_snapshot(&mut tx).await?;
        let scope = dispatch::ClaimScope {
            after,
            ..self.regions.claim_scope()
        };
        let claimed = dispatch::claim(&mut tx, now, due_by, deadline, limit, &scope).await?;
        if claimed.is_empty() {
            return Ok((due_by, None));
        }
        let held = Held {
            tx,
            claimed,
            seen,
            clock,
            started,
            lane: None,
        };
        Ok((due_by, Some(held)))
    }

    /// Publishes and records a held batch, wave by wave, each wave committed (and sends the
    /// cancel messages its last wave's `cancel_other` decisions asked for).
    ///
    /// # Errors
    /// [`super::Error::Store`] when a statement fails (the round is rolled back).
    pub(super) async fn finish(&self, held: Held) -> Result<Round> {
        let Held {
            tx,
            claimed,
            seen,
            clock,
            started,
            lane,
        } = held;
        let round = self
            .dispatch(tx, claimed, &seen, Release::WhenDue(clock))
            .await?;
        drop(lane);
        round.finished(started);
        if round.cancels > 0 {
            self.send_cancels().await?;
        }
        Ok(round)
    }

    /// [`Dispatcher::finish`], logged; whether the claimer should back off for a tick (a
    /// failed round, or runs left `PENDING` by a retryable launch error: NATS is down).
    async fn finish_logged(&self, held: Held) -> bool {
        match self.finish(held).await {
            Ok(round) => {
                crate::outage::answered("dispatcher");
                round.retry > 0
            }
            Err(err) => {
                if !crate::outage::failed("dispatcher", &err) {
                    tracing::error!(error = %crate::error_chain(&err), "dispatch round failed");
                }
                true
            }
        }
    }

    /// How long until the next run not yet claimed (its `fire_at` after `after`) comes
    /// within `lead`. Capped by the tick, so a run freed by a holder that died (or whose
    /// wake-up was lost) waits at most a tick; while this instance holds rounds, by the
    /// pre-staging lead instead: a claim then walks past every run the held rounds lock,
    /// and at a burst's tick that is the whole burst.
    async fn until_next_due(
        &self,
        after: DateTime<Utc>,
        lead: Duration,
        lanes: &Semaphore,
    ) -> Duration {
        let cap = self.cap(lanes);
        match dispatch::next_due_in(&self.pool, None, Some(after)).await {
            Ok(Some(due)) => {
                (due.saturating_sub(lead) + Duration::from_millis(1)).clamp(MIN_IDLE, cap)
            }
            Ok(None) => cap,
            Err(err) => {
                if !crate::outage::failed("dispatcher", &err) {
                    tracing::warn!(error = %crate::error_chain(&err), "next fire_at unknown");
                }
                self.config.tick
            }
        }
    }
}

impl<L: RunLauncher> Dispatcher<L> {
    /// The longest sleep of the claimer: the tick, or the pre-staging lead while this
    /// instance holds rounds (see [`Dispatcher::until_next_due`]).
    fn cap(&self, lanes: &Semaphore) -> Duration {
        if lanes.available_permits() < self.config.lanes.max(1) {
            self.config.tick.max(self.config.prestage)
        } else {
            self.config.tick
        }
    }
}

impl Held {
    fn in_lane(mut self, lane: OwnedSemaphorePermit) -> Held {
        self.lane = Some(lane);
        self
    }
}
