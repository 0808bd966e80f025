//! The dispatcher: due `PENDING` runs → launch messages on the stream, exactly once.
//!
//! A round (`round.rs`) claims a batch (`FOR UPDATE SKIP LOCKED`) → triages it (launch
//! deadline, DAGs; those outcomes are recorded first) → then, wave by wave as `fire_at`s
//! come: restages runs whose schedule changed (`restage.rs`) → decides the overlap policy
//! (`decide.rs`; exclusive schedules serialized by a per-schedule dispatch lock) → records
//! the wave's launches `ENQUEUED`, its other outcomes, and the wave's runs by name in
//! `launch_waves` → commits → publishes (`launch.rs`: pipelined, every PubAck awaited,
//! bounded by `launch_timeout`) → acknowledges the wave (`launch_waves` rows deleted, failed
//! publishes put back) → locks the runs still waiting again in a new transaction.
//!
//! A run is committed `ENQUEUED` before any executor can receive it, so its reports never
//! wait for the round. A process killed before the commit rolls the wave back: its runs
//! are `PENDING` again, and the next dispatcher publishes them. One killed after it leaves
//! the wave's rows: the sweeper publishes its runs again under the same `Nats-Msg-Id`, which
//! the stream drops as a duplicate of any it already stored (invariants "one message per
//! tick" and "claims die with their holder"). A retryable launch error puts the run back
//! `PENDING` (invariant "nothing is lost while NATS is down"); a permanent one fails it.
//!
//! Regions: before deciding, a round routes each run to the region it launches in, and
//! leaves `PENDING` those whose region's launch stream is not ready (`route.rs`,
//! `crate::regions`); the region is recorded with the launch.
//!
//! Pre-staging: a round claims runs due within `prestage` of the database's now and loads
//! their DAGs, then publishes them in waves as each `fire_at` comes on the database's clock
//! (`clock.rs`), so a burst's database work is done before its tick: the dispatch locks
//! and blockers of its exclusive schedules (`ahead.rs`), and the record of the launches
//! whose decision cannot change by then, with their row of `launch_waves` (`stage.rs`),
//! uncommitted until the tick. An instance holds up to `lanes` rounds at once, each its own
//! transaction and batch (`lanes.rs`): a burst of several batches is claimed ahead whole,
//! side by side, and its rounds publish together at the tick.
//!
//! The claimer's loop ([`Dispatcher::run`]) has three arms besides shutdown: the next
//! `fire_at`, a round finishing (its lane is free) and a wake-up (NOTIFY on `kairos_runs`:
//! a run made due now by trigger-now, backfill, a release from `QUEUED`, a run-launcher
//! start or a planner pass). Runs whose time ran out after their launch, and waves left
//! unacknowledged, are the sweeper's (`crate::sweep`).

mod clock;
mod decide;
mod decide_ahead;
mod floor;
mod lanes;
mod launch;
mod release;
mod report;
mod restage;
mod round;
mod route;
mod stage;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use kairos_launcher::RunLauncher;
use kairos_store::{dispatch, PgPool, Tx};

pub use clock::InstanceClock;
use release::Release;
pub use round::Round;

pub use crate::error::{Error, Result};
use crate::regions::Regions;

/// How the dispatcher batches and waits.
#[derive(Debug, Clone)]
pub struct DispatcherConfig {
    /// Runs claimed per round (`scheduler.batch_size`).
    pub batch_size: i64,
    /// Longest sleep between rounds (`scheduler.tick_ms`).
    pub tick: Duration,
    /// A run unpublished this long after it became due fails (`scheduler.launch_deadline_s`).
    pub launch_deadline: Duration,
    /// Longest wait for a wave's acknowledgements (after its commit).
    pub launch_timeout: Duration,
    /// How far ahead of `fire_at` a round may claim a run (`scheduler.prestage_ms`): the
    /// claim, the DAG and the message are ready before the tick, and the publish waits for
    /// `fire_at` on the database's clock. Zero: claim only runs already due.
    pub prestage: Duration,
    /// How long PostgreSQL keeps a round's claimed runs locked once its dispatcher stops
    /// talking (`scheduler.claim_idle_timeout_ms`): the round's session ends after this long
    /// idle in its transaction, and other instances claim the runs. More than `prestage`,
    /// which a round waits idle for its tick.
    pub claim_idle_timeout: Duration,
    /// Rounds one instance holds at once (`scheduler.dispatch_lanes`), each its own
    /// transaction on its own batch: a burst of several batches is claimed ahead, and one
    /// batch's publish overlaps another's record. The last free lane of several claims only
    /// runs already due.
    pub lanes: usize,
    /// The instance's clock (tests skew it).
    pub instance_clock: InstanceClock,
}

impl DispatcherConfig {
    /// A config with the given batch, tick and deadline; 10 s launch timeout, no
    /// pre-staging, claimed runs held 30 s by a silent round, one lane, the system clock.
    pub fn new(batch_size: i64, tick: Duration, launch_deadline: Duration) -> Self {
        DispatcherConfig {
            batch_size,
            tick,
            launch_deadline,
            launch_timeout: Duration::from_secs(10),
            prestage: Duration::ZERO,
            claim_idle_timeout: Duration::from_secs(30),
            lanes: 1,
            instance_clock: chrono::Utc::now,
        }
    }
}

/// Claims due runs and publishes them. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Dispatcher<L> {
    pool: PgPool,
    launcher: L,
    config: DispatcherConfig,
    regions: Arc<Regions>,
}

/// Shortest sleep between rounds, so rounds blocked by another dispatcher's locks do not spin.
const MIN_IDLE: Duration = Duration::from_millis(10);

impl<L: RunLauncher> Dispatcher<L> {
    /// A dispatcher over `pool` publishing through `launcher`.
    pub fn new(pool: PgPool, launcher: L, config: DispatcherConfig) -> Self {
        Dispatcher {
            pool,
            launcher,
            config,
            regions: Regions::none(),
        }
    }

    /// Routes runs of schedules with a region by what `regions` knows of their launch
    /// streams (`crate::regions`); without it, every run goes to its home region.
    pub fn with_regions(mut self, regions: Arc<Regions>) -> Self {
        self.regions = regions;
        self
    }

    /// The launcher (for readiness checks).
    pub fn launcher(&self) -> &L {
        &self.launcher
    }

    /// Runs the claimer and its rounds until `shutdown` resolves (`lanes.rs`); rounds
    /// already claimed finish first.
    ///
    /// # Errors
    /// Never: a failed round is logged and retried after a tick.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) -> Result<()> {
        self.run_lanes(shutdown).await;
        tracing::info!("dispatcher stopped; its last round committed, no claims held");
        Ok(())
    }

    /// Claims one batch of runs due within the pre-staging lead and dispatches it in one
    /// transaction, each run published once its `fire_at` has come.
    ///
    /// # Errors
    /// [`Error::Store`] when a statement fails (the round is rolled back).
    pub async fn round(&self) -> Result<Round> {
        match self.claim_batch(self.config.prestage, None).await? {
            (_, Some(held)) => self.finish(held).await,
            (_, None) => Ok(Round::default()),
        }
    }

    /// One round restricted to the `PENDING` run `key` (a run-launcher start publishes at
    /// once, whatever its `fire_at`).
    ///
    /// # Errors
    /// [`Error::Store`] when a statement fails (the round is rolled back).
    pub async fn dispatch_key(&self, key: &str) -> Result<Round> {
        let started = crate::metrics::BatchTimer::start();
        let mut tx = Tx::begin(&self.pool).await?;
        let now = kairos_store::now(&mut *tx, None).await?;
        let deadline = self.config.launch_deadline.as_secs_f64();
        let seen = dispatch::write_snapshot(&mut tx).await?;
        let Some(claimed) = dispatch::claim_key(&mut tx, key, now, deadline).await? else {
            return Ok(Round::default());
        };
        let round = self
            .dispatch(tx, vec![claimed], &seen, Release::Now(now))
            .await?;
        round.finished(started);
        Ok(round)
    }

    /// Publishes the cancel messages not sent yet (a `cancel_other` decision's, or an
    /// operator's right after it is committed); the sweeper sends what this leaves.
    ///
    /// # Errors
    /// [`Error::Store`] when a statement fails.
    pub async fn send_cancels(&self) -> Result<usize> {
        crate::sweep::send_cancels(&self.pool, &self.launcher).await
    }
}

/// What the run intake may ask of this instance's dispatcher: publish one run now, or the
/// cancel messages not sent yet. A narrow handle, so the HTTP layer never names the
/// launcher type.
pub trait DispatchNow: Send + Sync + std::fmt::Debug {
    /// Publishes the `PENDING` run `key` now, if it is still `PENDING` and not held.
    fn dispatch_now<'a>(
        &'a self,
        key: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<()>> + Send + 'a>>;

    /// Publishes the cancel messages of `CANCELLING` runs not sent yet.
    fn send_cancels_now(&self) -> Pin<Box<dyn Future<Output = Result<()>> + Send + '_>>;
}

impl<L: RunLauncher + std::fmt::Debug> DispatchNow for Dispatcher<L> {
    fn dispatch_now<'a>(
        &'a self,
        key: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<()>> + Send + 'a>> {
        Box::pin(async move { self.dispatch_key(key).await.map(|_| ()) })
    }

    fn send_cancels_now(&self) -> Pin<Box<dyn Future<Output = Result<()>> + Send + '_>> {
        Box::pin(async move { self.send_cancels().await.map(|_| ()) })
    }
}
