//! The sweeper: the worker role that finds runs whose time ran out, on its own interval.
//! One sweep, step by step, each step its own transaction:
//! 1. time-outs (`timeouts.rs`): in-flight runs past `max_run_seconds` or silent past
//!    `heartbeat_timeout_s` become `TIMED_OUT` with their next attempt or a dead letter;
//! 2. cancels (`cancels.rs`): `CANCELLING` runs unconfirmed past `cancel_timeout` end, and
//!    cancel messages not sent yet go out;
//! 3. lost launches: waves a dispatcher recorded and never acknowledged (it died between
//!    its commit and its publishes' acknowledgements) are published again
//!    (`unacknowledged.rs`); `ENQUEUED` runs no executor started in time are published
//!    again, or fail as never started (`republish.rs`);
//! 4. the oldest `QUEUED` run of every schedule that nothing holds is released;
//! 5. dead letters (`dead_letters.rs`) not yet in the DLQ stream are published;
//! 6. deadlines (`deadlines.rs`): runs not `SUCCESS` by `run_at + deadline_s` are marked
//!    late (never stopped), and the overdue gauge is set.
//!
//! Every step locks the rows it works on (`FOR UPDATE SKIP LOCKED`), so the sweepers of
//! several instances share the work, and a killed one leaves its rows to the next.

mod cancels;
mod dead_letters;
mod deadlines;
mod republish;
mod timeouts;
mod unacknowledged;

use std::future::Future;
use std::time::Duration;

use kairos_launcher::RunLauncher;
use kairos_store::{dispatch, PgPool};

pub(crate) use cancels::send_cancels;

use crate::Result;

/// How the sweeper waits, and when runs count as lost.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// How often a sweep runs.
    pub every: Duration,
    /// An `ENQUEUED` run not `STARTED` this long is re-published, unless its schedule says
    /// otherwise (`scheduler.start_timeout_s`; zero: never).
    pub start_timeout: Duration,
    /// Re-publishes of one attempt before it fails as never started (`scheduler.max_republish`).
    pub max_republish: u32,
    /// A `CANCELLING` run the executor has not confirmed this long after the cancel was
    /// asked for becomes `CANCELLED` (`scheduler.cancel_timeout_s`).
    pub cancel_timeout: Duration,
    /// A dispatcher wave recorded this long ago and still not acknowledged is taken as its
    /// dispatcher's death: its runs still `ENQUEUED` are published again. Longer than the
    /// dispatcher's launch timeout, and far inside the launch stream's duplicate window.
    pub unacknowledged_after: Duration,
}

impl Default for SweepConfig {
    /// A sweep every second; 300 s start timeout, 3 re-publishes, 60 s cancel timeout, waves
    /// unacknowledged after 30 s.
    fn default() -> Self {
        SweepConfig {
            every: Duration::from_secs(1),
            start_timeout: Duration::from_secs(300),
            max_republish: 3,
            cancel_timeout: Duration::from_secs(60),
            unacknowledged_after: Duration::from_secs(30),
        }
    }
}

/// Times runs out, ends cancels, re-publishes lost launches, releases queued runs and
/// copies dead letters to the DLQ stream.
#[derive(Debug)]
pub struct Sweeper<L> {
    pool: PgPool,
    launcher: L,
    config: SweepConfig,
}

impl<L: RunLauncher> Sweeper<L> {
    /// A sweeper over `pool` publishing through `launcher`.
    pub fn new(pool: PgPool, launcher: L, config: SweepConfig) -> Self {
        Sweeper {
            pool,
            launcher,
            config,
        }
    }

    /// Sweeps every `config.every` until `shutdown` resolves; the sweep in progress
    /// finishes first. A failed sweep is logged and the next one tries again.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut every = tokio::time::interval(self.config.every);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                _ = every.tick() => {
                    match self.sweep().await {
                        Ok(_) => crate::outage::answered("sweeper"),
                        Err(err) => {
                            if !crate::outage::failed("sweeper", &err) {
                                tracing::warn!(error = %crate::error_chain(&err), "sweep failed");
                            }
                        }
                    }
                }
            }
        }
        tracing::info!("sweeper stopped");
    }

    /// One sweep. Returns how many runs timed out and how many queued runs were released.
    ///
    /// # Errors
    /// [`crate::Error::Store`] when a statement fails (that step is rolled back).
    pub async fn sweep(&self) -> Result<(usize, usize)> {
        let timed_out = self.time_out().await?;
        self.time_out_cancels().await?;
        self.send_cancels().await?;
        self.publish_unacknowledged().await?;
        self.republish_unstarted().await?;
        let released = self.release_queued().await?;
        self.send_dead_letters().await?;
        self.mark_late(None).await?;
        Ok((timed_out, released))
    }

    /// Publishes the cancel messages not sent yet. Returns how many the stream acknowledged.
    ///
    /// # Errors
    /// [`crate::Error::Store`] when a statement fails.
    pub async fn send_cancels(&self) -> Result<usize> {
        send_cancels(&self.pool, &self.launcher).await
    }

    /// Releases the oldest `QUEUED` run of every schedule that nothing holds.
    async fn release_queued(&self) -> Result<usize> {
        let now = kairos_store::now(&self.pool, None).await?;
        let released = dispatch::release_queued(&self.pool, now).await?;
        for key in &released {
            tracing::info!(
                key = %key,
                trace_id = %crate::trace_of(key),
                "queued run released (nothing holds its schedule)",
            );
        }
        Ok(released.len())
    }
}
