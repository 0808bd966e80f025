//! `kairos serve [--config FILE] [--roles api,...] [--no-migrate]`: runs the roles of one
//! instance: the `api` role (registrar, workflow store, health, executor routes), the
//! `planner`, `dispatcher` (with the sweeper beside it: time-outs, cancels, lost launches,
//! queued releases, dead letters) and `status` roles (`kairos_worker`; NATS wiring in
//! `dispatch.rs`: only the dispatcher and status roles need NATS, and they wait for it),
//! and `retention` (deletes old finished runs per `[history]`; on by default, safe on every
//! instance at once, needs no NATS). Every role runs as a task until
//! SIGINT/SIGTERM, then each finishes what it is doing (the api its requests, the planner
//! and dispatcher their batch, retention its batch) within `SHUTDOWN_GRACE`; a role still
//! busy then is aborted, which is safe: its claim transaction rolls back and another
//! instance takes the work over.
//!
//! Metrics: one Prometheus recorder is installed for the process ([`install_metrics`]);
//! the roles record into it, `GET /metrics` renders it, and a `metrics` task refreshes the
//! backlog gauges every [`BACKLOG_EVERY`].

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use chrono::Duration;
use kairos_api::AppState;
use kairos_auth::Authenticator;
use kairos_launcher::NatsLink;
use kairos_registrar::{DagLimit, Registrar, Settings};
use kairos_store::PgPool;
use kairos_worker::intake::Intake;
use kairos_worker::planner::{Planner, PlannerConfig};
use kairos_worker::retention::{Retention, RetentionConfig};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::config::{self, Config, LogFormat};

/// A role an instance runs (`--roles`); every instance runs all of them unless told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// The HTTP API, the page and `/metrics`.
    Api,
    /// Writes the runs of due ticks ahead of time.
    Planner,
    /// Claims due runs and publishes their launches, and runs the sweep.
    Dispatcher,
    /// Applies the executors' status reports from the status stream.
    Status,
    /// Deletes finished runs past `history.retention_days` and keeps the run partitions.
    Retention,
}

/// Arguments of `kairos serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A TOML file layered over the defaults (see config/default.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Roles to run, comma separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "api,planner,dispatcher,status,retention"
    )]
    roles: Vec<Role>,
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
    let config = config::load(args.config.as_deref())
        .map_err(|err| anyhow::anyhow!(config::explain(&err)))?;
    // Kept to the end: dropping it sends the spans still queued.
    let _exporting = init_tracing(&config)?;
    let runs = |role: Role| args.roles.contains(&role);
    if args.roles.is_empty() {
        bail!("--roles: nothing to run (use api, planner, dispatcher, status, retention)");
    }
    let auth = if runs(Role::Api) {
        kairos_auth::check_bind(config.auth.mode, config.http.bind)?;
        Some(Authenticator::from_config(&config.auth).context("auth config")?)
    } else {
        None
    };
    let metrics = install_metrics()?;
    let runtime = tokio::runtime::Runtime::new().context("start the async runtime")?;
    runtime.block_on(async {
        let pool = crate::migrate::connect(&config).await?;
        if !args.no_migrate {
            kairos_store::migrate(&pool)
                .await
                .context("apply migrations")?;
        }
        let (stop, stopping) = watch::channel(false);
        let mut roles = JoinSet::new();
        {
            let (pool, metrics) = (pool.clone(), metrics.clone());
            let lookahead = std::time::Duration::from_millis(config.scheduler.lookahead_ms);
            let stopped = stopped(stopping.clone());
            roles.spawn(refresh_metrics(pool, metrics, lookahead, stopped));
        }
        if runs(Role::Retention) {
            let retention = Retention::new(pool.clone(), retention_config(&config));
            let stopped = stopped(stopping.clone());
            roles.spawn(async move { retention.run(stopped).await.context("retention") });
        }
        if runs(Role::Planner) {
            // The days the planner is about to fill get their partitions before it starts
            // (retention passes keep them ahead later). A failure only costs retention its
            // fast path for those days, so it is logged, not fatal.
            let days_ahead = config.history.partition_days_ahead;
            if let Err(err) = prepare_partitions(&pool, days_ahead).await {
                tracing::warn!(error = %format!("{err:#}"), "run partitions not created at start");
            }
            let planner = Planner::new(pool.clone(), planner_config(&config)?);
            let stopped = stopped(stopping.clone());
            roles.spawn(async move { planner.run(stopped).await.context("planner") });
        }
        // Only the roles that publish or consume need NATS. They start now and wait for the
        // connection, which is made in the background and retried while NATS is down.
        let batches = config.scheduler.status_batches as usize;
        let intake = Intake::with_batches(pool.clone(), batches);
        let link = (runs(Role::Dispatcher) || runs(Role::Status)).then(NatsLink::new);
        // Deploys refuse a DAG that cannot fit a launch message: the NATS default limit
        // until the server says its own.
        let dag_limit = DagLimit::default();
        if let Some(link) = &link {
            // A misconfiguration (a stream name taken by another deployment) ends the
            // instance; an unreachable server is retried in the background.
            let mut nats = config.nats.launcher();
            nats.regions.clone_from(&config.regions.names);
            let link = link.clone();
            let (dag_limit, stopped) = (dag_limit.clone(), stopped(stopping.clone()));
            roles.spawn(async move {
                tokio::pin!(stopped);
                tokio::select! {
                    () = &mut stopped => return Ok(()),
                    connected = link.connect(nats) => connected.context("nats")?,
                }
                if let Some(launcher) = link.get() {
                    dag_limit.set_from_max_payload(launcher.max_payload());
                }
                stopped.await;
                Ok(())
            });
        }
        if let (true, Some(link)) = (runs(Role::Dispatcher), &link) {
            let (config, pool, link) = (config.clone(), pool.clone(), link.clone());
            let stopped_sweeping = stopped(stopping.clone());
            roles.spawn(crate::nats_roles::run_sweeper(
                config.clone(),
                pool.clone(),
                link.clone(),
                stopped_sweeping,
            ));
            let (intake, stopped) = (intake.clone(), stopped(stopping.clone()));
            roles.spawn(crate::nats_roles::run_dispatcher(
                config, pool, link, intake, stopped,
            ));
        }
        if let (true, Some(link)) = (runs(Role::Status), &link) {
            let (link, intake, pool) = (link.clone(), intake.clone(), pool.clone());
            let (partitions, stopped) = (config.nats.status_partitions, stopped(stopping.clone()));
            roles.spawn(crate::status_role::run_status(
                link, intake, pool, partitions, stopped,
            ));
        }
        if let Some(auth) = auth {
            let (config, stopped) = (config.clone(), stopped(stopping.clone()));
            let api = Api {
                auth,
                dag_limit,
                pool,
                intake,
                nats: link,
                metrics,
            };
            roles.spawn(async move { serve_api(&config, api, stopped).await });
        }
        supervise(roles, stop).await
    })
}

/// How long roles get to finish their batch after a shutdown signal.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// Waits for SIGINT/SIGTERM or the first role to end, then tells every role to stop and
/// waits for all of them, at most `SHUTDOWN_GRACE`. The first role error is the answer.
async fn supervise(
    mut roles: JoinSet<anyhow::Result<()>>,
    stop: watch::Sender<bool>,
) -> anyhow::Result<()> {
    let first = tokio::select! {
        () = shutdown() => None,
        ended = roles.join_next() => ended,
    };
    let _ = stop.send(true);
    match tokio::time::timeout(SHUTDOWN_GRACE, drain(&mut roles, first)).await {
        Ok(result) => result,
        Err(_) => {
            roles.abort_all();
            tracing::warn!(
                grace_s = SHUTDOWN_GRACE.as_secs(),
                "roles still busy after the grace; aborted (their claim transactions roll back)"
            );
            anyhow::bail!("roles did not stop within {SHUTDOWN_GRACE:?}; aborted them")
        }
    }
}

/// Waits for every role; the first error (starting with `first`, if a role already ended).
async fn drain(
    roles: &mut JoinSet<anyhow::Result<()>>,
    mut first: Option<Result<anyhow::Result<()>, tokio::task::JoinError>>,
) -> anyhow::Result<()> {
    let mut result = Ok(());
    while let Some(ended) = match first.take() {
        Some(ended) => Some(ended),
        None => roles.join_next().await,
    } {
        let ended = ended.context("role task panicked").and_then(|r| r);
        if let (Err(err), true) = (ended, result.is_ok()) {
            result = Err(err);
        }
    }
    result
}

/// Resolves once `stop` says so (or its sender is gone).
async fn stopped(mut stopping: watch::Receiver<bool>) {
    let _ = stopping.wait_for(|stop| *stop).await;
}

/// The planner's knobs from `[scheduler]`.
fn planner_config(config: &Config) -> anyhow::Result<PlannerConfig> {
    let scheduler = &config.scheduler;
    let millis = |name: &str, ms: u64| {
        i64::try_from(ms)
            .map(Duration::milliseconds)
            .with_context(|| format!("scheduler.{name} is too large"))
    };
    Ok(PlannerConfig {
        tick: std::time::Duration::from_millis(scheduler.tick_ms),
        lookahead: millis("lookahead_ms", scheduler.lookahead_ms)?,
        misfire_grace: millis("misfire_grace_ms", scheduler.misfire_grace_ms)?,
        max_catchup: scheduler.max_catchup,
        max_catchup_per_pass: scheduler.max_catchup_per_tick,
        batch_size: scheduler.batch_size,
        wake_within: millis(
            "prestage_ms",
            scheduler
                .prestage_ms
                .saturating_add(scheduler.tick_ms.max(scheduler.prestage_ms)),
        )?,
        pinned_now: None,
    })
}

/// Makes the daily run partitions ahead of the database's today.
async fn prepare_partitions(pool: &kairos_store::PgPool, days_ahead: u32) -> anyhow::Result<()> {
    let now = kairos_store::now(pool, None).await?;
    kairos_worker::retention::create_partitions(pool, now, days_ahead).await?;
    Ok(())
}

/// Retention's knobs from `[history]`. A pass deletes at most 100 batches (100 k rows at
/// the default batch size), resting 50 ms between batches so the hot path keeps the database.
fn retention_config(config: &Config) -> RetentionConfig {
    let history = &config.history;
    RetentionConfig {
        retention: Duration::days(i64::from(history.retention_days)),
        keep_last: history.keep_last,
        batch_size: history.batch_size,
        max_batches: 100,
        batch_pause: std::time::Duration::from_millis(50),
        interval: std::time::Duration::from_secs(history.interval_s),
        partition_days_ahead: history.partition_days_ahead,
        pinned_now: None,
        audit_retention: Duration::days(i64::from(history.audit_retention_days)),
    }
}

/// What the api role serves with.
struct Api {
    auth: Authenticator,
    dag_limit: DagLimit,
    pool: PgPool,
    intake: Intake,
    nats: Option<NatsLink>,
    metrics: PrometheusHandle,
}

async fn serve_api(
    config: &Config,
    api: Api,
    stopped: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let state = AppState {
        registrar: Registrar::new(api.pool, settings(config, api.dag_limit)?),
        auth: Arc::new(api.auth),
        max_body_bytes: config.http.max_body_bytes,
        allowed_hosts: config.http.hosts()?,
        intake: api.intake,
        nats: api.nats,
        metrics: Some(api.metrics),
        status_subjects: config.nats.launcher().status_subjects(),
    };
    let listener = tokio::net::TcpListener::bind(config.http.bind)
        .await
        .with_context(|| format!("bind http.bind = {}", config.http.bind))?;
    tracing::info!(bind = %config.http.bind, auth = %config.auth.mode, "api listening");
    // Our own accept loop rather than `axum::serve`, which has no header or body timeout
    // and no connection limit.
    kairos_api::serve(
        listener,
        kairos_api::app(state),
        config.http.limits(),
        stopped,
    )
    .await
    .context("serve http")?;
    tracing::info!("api stopped");
    Ok(())
}

/// The registrar's settings from `[scheduler]` and `[registrar]`.
fn settings(config: &Config, dag_limit: DagLimit) -> anyhow::Result<Settings> {
    let min_interval = i64::try_from(config.scheduler.min_interval_s)
        .context("scheduler.min_interval_s is too large")?;
    Ok(Settings {
        min_interval: Duration::seconds(min_interval),
        allowed_zones: config.registrar.allowed_timezones.clone(),
        default_overlap: config.scheduler.default_overlap_policy,
        default_catchup: config.scheduler.default_catchup_policy,
        default_jitter_ms: config.scheduler.default_jitter_ms,
        dag_limit,
        pinned_now: None,
        regions: config.regions.names.clone(),
    })
}

/// Installs the process's tracing: log lines per `[log]` and, when `[otlp]` names an
/// endpoint, span export (`otlp.rs`), whose guard flushes the queued spans when dropped.
/// The span events (target `SPAN_TARGET`) never reach the log; with export off nothing
/// wants them, so their callsites stay disabled.
fn init_tracing(config: &Config) -> anyhow::Result<Option<crate::otlp::Exporting>> {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{fmt, Layer, Registry};

    let filter = log_filter(&config.log.level)?;
    let terminal = std::io::stdout().is_terminal();
    let json = match config.log.format {
        LogFormat::Auto => !terminal,
        LogFormat::Json => true,
        LogFormat::Pretty => false,
    };
    let lines: Box<dyn Layer<Registry> + Send + Sync> = if json {
        // One object per line; the decision fields (key, schedule_id, reason, ...) are
        // top-level keys, not buried in the message, and a request's id is in its span.
        Box::new(fmt::layer().json().flatten_event(true))
    } else {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
        Box::new(fmt::layer().with_ansi(terminal && !no_color))
    };
    let (spans, exporting) = match crate::otlp::start(&config.otlp)? {
        Some((layer, exporting)) => {
            // Whatever `log.level` says: the request spans and their access lines, and
            // the span events.
            let wanted = Targets::new()
                .with_target(crate::otlp::ACCESS_TARGET, LevelFilter::INFO)
                .with_target(kairos_core::trace::SPAN_TARGET, LevelFilter::INFO);
            (Some(layer.with_filter(wanted)), Some(exporting))
        }
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(lines.with_filter(filter))
        .with(spans)
        .try_init()
        .context("install the tracing subscriber")?;
    Ok(exporting)
}

/// The filter of log lines: `log.level`, without the span events (target `SPAN_TARGET`)
/// whatever it says, and with PostgreSQL's notices (such as the migrator's "relation
/// `_sqlx_migrations` already exists, skipping" at every start) only from warnings up,
/// unless `log.level` names `sqlx` itself.
pub(crate) fn log_filter(level: &str) -> anyhow::Result<tracing_subscriber::EnvFilter> {
    let no_spans = format!("{}=off", kairos_core::trace::SPAN_TARGET)
        .parse()
        .context("span target directive")?;
    let filter = tracing_subscriber::EnvFilter::try_new(level)
        .with_context(|| format!("log.level {level:?}"))?
        .add_directive(no_spans);
    if level.contains("sqlx") {
        return Ok(filter);
    }
    let quiet_notices = "sqlx::postgres::notice=warn"
        .parse()
        .context("notice directive")?;
    Ok(filter.add_directive(quiet_notices))
}

/// How often the backlog gauges are read (and histogram samples folded in).
const BACKLOG_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Installs the process's Prometheus recorder (once; this is the only caller) with its
/// descriptions and `kairos_build_info`, and returns the handle `GET /metrics` renders.
fn install_metrics() -> anyhow::Result<PrometheusHandle> {
    let recorder = kairos_worker::metrics::recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).context("install the metrics recorder")?;
    kairos_worker::metrics::describe();
    kairos_worker::metrics::zero();
    kairos_worker::metrics::build_info(env!("CARGO_PKG_VERSION"));
    kairos_api::metrics::describe();
    Ok(handle)
}

/// Every `BACKLOG_EVERY` until `stopped`: sets the backlog gauges from one query and runs
/// the recorder's upkeep. A failed read is logged; the gauges keep their last values.
async fn refresh_metrics(
    pool: PgPool,
    metrics: PrometheusHandle,
    lookahead: std::time::Duration,
    stopped: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    tokio::pin!(stopped);
    loop {
        if let Err(err) = kairos_worker::metrics::refresh_backlog(&pool, lookahead).await {
            if !kairos_worker::outage::failed("metrics", &err) {
                tracing::warn!(error = %err, "backlog gauges not refreshed");
            }
        }
        metrics.run_upkeep();
        tokio::select! {
            () = &mut stopped => return Ok(()),
            () = tokio::time::sleep(BACKLOG_EVERY) => {}
        }
    }
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

#[cfg(test)]
mod tests {
    use super::log_filter;

    #[test]
    fn postgres_notices_log_from_warnings_up_unless_sqlx_is_named() {
        let quiet = log_filter("info").expect("filter").to_string();
        assert!(quiet.contains("sqlx::postgres::notice=warn"), "{quiet}");
        let asked = log_filter("info,sqlx=debug").expect("filter").to_string();
        assert!(!asked.contains("sqlx::postgres::notice=warn"), "{asked}");
    }
}
