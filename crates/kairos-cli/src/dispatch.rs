//! Wiring of the NATS-facing roles of `kairos serve`: the launcher from `[nats]`, the
//! `dispatcher` role (`kairos_worker::dispatcher`) and the `status` role (the durable
//! consumer on `<prefix>.status.>` feeding the store).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use kairos_launcher::status::{StatusConsumer, STATUS_STREAM};
use kairos_launcher::{NatsConfig, NatsLauncher};
use kairos_store::PgPool;
use kairos_worker::dispatcher::{intake, Dispatcher, DispatcherConfig};

use crate::config::Config;

/// The shared dispatcher (also used by the api's `POST /run-launcher/start`).
pub type SharedDispatcher = Arc<Dispatcher<NatsLauncher>>;

/// Connects to NATS and creates (or updates) the launch stream.
///
/// # Errors
/// When NATS cannot be reached or the stream cannot be created.
pub async fn launcher(config: &Config) -> anyhow::Result<NatsLauncher> {
    let nats = &config.nats;
    let mut launcher = NatsConfig::new(nats.url.clone());
    launcher.stream = nats.stream.clone();
    launcher.subject_prefix = nats.subject_prefix.clone();
    launcher.duplicate_window = Duration::from_secs(nats.duplicate_window_s);
    launcher.tls_ca = nats.tls_ca.clone();
    launcher.tls_client = nats.tls_cert.clone().zip(nats.tls_key.clone());
    launcher.creds_file = nats.creds_file.clone();
    launcher.user_password = nats.user.clone().zip(nats.password.clone());
    launcher.token = nats.token.clone();
    NatsLauncher::connect(launcher)
        .await
        .context("connect to NATS (nats.url) and create the launch stream")
}

/// The dispatcher from `[scheduler]`.
pub fn dispatcher(config: &Config, pool: PgPool, launcher: NatsLauncher) -> SharedDispatcher {
    let scheduler = &config.scheduler;
    let dispatcher_config = DispatcherConfig::new(
        i64::from(scheduler.batch_size),
        Duration::from_millis(scheduler.tick_ms),
        Duration::from_secs(scheduler.launch_deadline_s),
    );
    Arc::new(Dispatcher::new(pool, launcher, dispatcher_config))
}

/// The `dispatcher` role: rounds until `stopped`; the round in progress finishes.
///
/// # Errors
/// Never in practice (rounds log their failures and retry).
pub async fn run_dispatcher(
    dispatcher: SharedDispatcher,
    stopped: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    tracing::info!("dispatcher started");
    dispatcher.run(stopped).await.context("dispatcher")?;
    tracing::info!("dispatcher stopped");
    Ok(())
}

/// The `status` role: the durable status consumer into the store until `stopped`.
///
/// # Errors
/// When the status stream or consumer cannot be created.
pub async fn run_status(
    config: &Config,
    pool: PgPool,
    launcher: &NatsLauncher,
    stopped: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let consumer = StatusConsumer::connect(launcher, STATUS_STREAM, &config.nats.subject_prefix)
        .await
        .context("create the status stream and consumer")?;
    tracing::info!(stream = STATUS_STREAM, "status intake started");
    intake::consume_status(pool, &consumer, stopped)
        .await
        .context("status consumer")?;
    tracing::info!("status intake stopped");
    Ok(())
}
