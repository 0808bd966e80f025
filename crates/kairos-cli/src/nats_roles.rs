//! Wiring of the NATS-facing roles of `kairos serve`: the connection from `[nats]` (made in
//! the background, so every role starts while NATS is unreachable), the `dispatcher` role
//! (`kairos_worker::dispatcher`, and beside it `kairos_worker::sweep`: time-outs, cancels,
//! lost launches, queued releases and dead letters); the `status` role is in `status_role.rs`.
//! Each waits for the connection and then begins on its own; planning never waits on NATS.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use kairos_launcher::NatsLink;
use kairos_store::PgPool;
use kairos_worker::dispatcher::{Dispatcher, DispatcherConfig};
use kairos_worker::intake::Intake;
use kairos_worker::regions::Regions;
use kairos_worker::sweep::{SweepConfig, Sweeper};

use crate::config::Config;

/// The dispatcher's knobs from `[scheduler]`.
fn dispatcher_config(config: &Config) -> DispatcherConfig {
    let scheduler = &config.scheduler;
    let mut dispatcher = DispatcherConfig::new(
        i64::from(scheduler.batch_size),
        Duration::from_millis(scheduler.tick_ms),
        Duration::from_secs(scheduler.launch_deadline_s),
    );
    dispatcher.prestage = Duration::from_millis(scheduler.prestage_ms);
    dispatcher.claim_idle_timeout = Duration::from_millis(scheduler.claim_idle_timeout_ms);
    dispatcher.lanes = scheduler.dispatch_lanes as usize;
    dispatcher
}

/// The sweeper's knobs from `[scheduler]`.
fn sweep_config(config: &Config) -> SweepConfig {
    let scheduler = &config.scheduler;
    SweepConfig {
        start_timeout: Duration::from_secs(scheduler.start_timeout_s),
        max_republish: scheduler.max_republish,
        cancel_timeout: Duration::from_secs(scheduler.cancel_timeout_s),
        ..SweepConfig::default()
    }
}

/// Resolves with the launcher once `link` is connected, or with `None` when `stopped`
/// comes first.
pub(crate) async fn connected(
    link: &NatsLink,
    stopped: &mut (impl Future<Output = ()> + Unpin),
) -> Option<kairos_launcher::NatsLauncher> {
    tokio::select! {
        () = stopped => None,
        launcher = link.wait() => Some(launcher),
    }
}

/// The `dispatcher` role: waits for NATS, attaches itself to the intake (so run-launcher
/// starts publish at once), then rounds until `stopped`; the round in progress finishes.
///
/// # Errors
/// Never in practice (rounds log their failures and retry).
pub async fn run_dispatcher(
    config: Config,
    pool: PgPool,
    link: NatsLink,
    intake: Intake,
    stopped: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    tokio::pin!(stopped);
    let Some(launcher) = connected(&link, &mut stopped).await else {
        return Ok(());
    };
    let regions = if config.region.is_empty() {
        Regions::new(&config.regions.names, config.regions.fallback_after())
    } else {
        Regions::at_home(
            &config.regions.names,
            config.regions.fallback_after(),
            &config.region,
            config.regions.others_after(),
        )
    };
    let watching = tokio::spawn(
        regions
            .clone()
            .watch(Arc::new(launcher.clone()), config.regions.probe_every()),
    );
    let dispatcher = Dispatcher::new(pool, launcher, dispatcher_config(&config));
    let dispatcher = Arc::new(dispatcher.with_regions(regions));
    intake.attach(dispatcher.clone());
    tracing::info!(region = %config.region, "dispatcher started");
    let ran = dispatcher.run(stopped).await.context("dispatcher");
    watching.abort();
    ran?;
    tracing::info!("dispatcher stopped");
    Ok(())
}

/// The sweeper, beside the dispatcher: waits for NATS, then sweeps until `stopped`; the
/// sweep in progress finishes.
///
/// # Errors
/// Never in practice (sweeps log their failures and retry).
pub async fn run_sweeper(
    config: Config,
    pool: PgPool,
    link: NatsLink,
    stopped: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    tokio::pin!(stopped);
    let Some(launcher) = connected(&link, &mut stopped).await else {
        return Ok(());
    };
    let sweeper = Sweeper::new(pool, launcher, sweep_config(&config));
    tracing::info!("sweeper started");
    sweeper.run(stopped).await;
    Ok(())
}
