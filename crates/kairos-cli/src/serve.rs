//! `kairos serve [--config FILE] [--roles api,...] [--no-migrate]`: runs the roles of one
//! instance. This build serves the `api` role (registrar, workflow store, health); the
//! `planner`, `dispatcher` and `status` roles arrive with the worker (issue 4) and are
//! reported as not available rather than pretended.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use chrono::Duration;
use kairos_api::AppState;
use kairos_auth::Authenticator;
use kairos_registrar::{Registrar, Settings};

use crate::config::{self, Config, LogFormat};

/// Every role an instance can run.
const ROLES: [&str; 4] = ["api", "planner", "dispatcher", "status"];
/// The roles this build implements.
const AVAILABLE: [&str; 1] = ["api"];

/// Arguments of `kairos serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A TOML file layered over the defaults (see config/default.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Roles to run, comma separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "api,planner,dispatcher,status"
    )]
    roles: Vec<String>,
    /// Do not apply migrations at start.
    #[arg(long)]
    no_migrate: bool,
}

/// Runs until SIGINT or SIGTERM.
///
/// # Errors
/// Bad config (named key), `auth.mode = none` on a non-loopback bind, an unreachable
/// database, a failed migration, or a bind that fails.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let config = config::load(args.config.as_deref()).map_err(|err| anyhow::anyhow!("{err}"))?;
    init_tracing(&config)?;
    for role in &args.roles {
        if !ROLES.contains(&role.as_str()) {
            bail!("--roles: {role:?} is not a role (use {})", ROLES.join(", "));
        }
        if !AVAILABLE.contains(&role.as_str()) {
            tracing::warn!(role = %role, "role not available in this build yet; not started");
        }
    }
    if !args.roles.iter().any(|r| r == "api") {
        bail!("--roles: nothing to run (this build implements only the api role)");
    }
    kairos_auth::check_bind(config.auth.mode, config.http.bind)?;
    let auth = Authenticator::from_config(&config.auth).context("auth config")?;
    let runtime = tokio::runtime::Runtime::new().context("start the async runtime")?;
    runtime.block_on(serve_api(&config, auth, !args.no_migrate))
}

async fn serve_api(config: &Config, auth: Authenticator, migrate: bool) -> anyhow::Result<()> {
    let pool = crate::migrate::connect(config).await?;
    if migrate {
        kairos_store::migrate(&pool)
            .await
            .context("apply migrations")?;
    }
    let state = AppState {
        registrar: Registrar::new(pool, settings(config)?),
        auth: Arc::new(auth),
        max_body_bytes: config.http.max_body_bytes,
    };
    let listener = tokio::net::TcpListener::bind(config.http.bind)
        .await
        .with_context(|| format!("bind http.bind = {}", config.http.bind))?;
    tracing::info!(bind = %config.http.bind, auth = %config.auth.mode, "api listening");
    axum::serve(listener, kairos_api::app(state))
        .with_graceful_shutdown(shutdown())
        .await
        .context("serve http")?;
    tracing::info!("api stopped");
    Ok(())
}

/// The registrar's settings from `[scheduler]` and `[registrar]`.
fn settings(config: &Config) -> anyhow::Result<Settings> {
    let min_interval = i64::try_from(config.scheduler.min_interval_s)
        .context("scheduler.min_interval_s is too large")?;
    Ok(Settings {
        min_interval: Duration::seconds(min_interval),
        allowed_zones: config.registrar.allowed_timezones.clone(),
        default_overlap: config.scheduler.default_overlap_policy,
        default_catchup: config.scheduler.default_catchup_policy,
        default_jitter_ms: config.scheduler.default_jitter_ms,
        pinned_now: None,
    })
}

fn init_tracing(config: &Config) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(&config.log.level)
        .with_context(|| format!("log.level {:?}", config.log.level))?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match config.log.format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Pretty => builder.init(),
    }
    Ok(())
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    tracing::info!("shutdown requested");
}
