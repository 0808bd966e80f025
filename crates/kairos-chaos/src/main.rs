//! `kairos-chaos`: kairos under faults, checked for lost and doubled ticks.
//!
//! A run owns everything it touches: a PostgreSQL cluster made with `initdb` in a temporary
//! directory (`pg.rs`), a nats-server with JetStream (`kairos_testkit::NatsServer`), and
//! three `kairos serve` instances with every role (`fleet.rs`), one on the real clock, one
//! at +5 min and one at -5 min (libfaketime). It registers `--schedules` schedules firing
//! every second (overlap `allow`, catch-up `fire_immediately`, a short `start_timeout_s`),
//! is itself the executor on the launch stream (`executor.rs`), and for `--duration-s`
//! kills, stops and starts things (`faults.rs`). After a settle it checks the window of
//! ticks (`check.rs`) and prints one line of figures (`report.rs`); it exits non-zero when a
//! tick was lost, doubled or stuck, or an instance did not recover.
//!
//! With `--ha sync` or `--ha async` the database is a high-availability cluster of the run's
//! own (`ha.rs`: `scripts/ha`, Patroni, HAProxy) and the faults are failovers of its primary
//! instead (`failovers.rs`: kills and planned switchovers); the three instances run on the
//! real clock.

mod check;
mod executor;
mod failovers;
mod faults;
mod fleet;
mod ha;
mod pg;
mod report;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use async_nats::jetstream;
use clap::Parser;
use sqlx::postgres::PgPoolOptions;

/// The chaos run's command line.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "kairos-chaos",
    about = "Run kairos under kills, stops, outages and clock skew; check nothing was lost or doubled"
)]
struct Args {
    /// The `kairos` binary to start.
    #[arg(long, default_value = "target/release/kairos")]
    kairos: String,
    /// Schedules registered, each firing every second.
    #[arg(long, default_value_t = 200)]
    schedules: usize,
    /// How long faults go on (seconds); the ticks of this window are checked.
    #[arg(long, default_value_t = 540)]
    duration_s: u64,
    /// Seconds between kill -9s.
    #[arg(long, default_value_t = 12)]
    kill_every_s: u64,
    /// How long one instance stays SIGSTOPped: above kairos's 60 s statement timeout and
    /// 30 s idle-in-transaction timeout.
    #[arg(long, default_value_t = 70)]
    stop_s: u64,
    /// How long nats-server stays down.
    #[arg(long, default_value_t = 30)]
    nats_outage_s: u64,
    /// The schedules' `start_timeout_s` (re-publish of a launch nobody started).
    #[arg(long, default_value_t = 30)]
    start_timeout_s: u64,
    /// Longest wait after the faults for every run of the window to end.
    #[arg(long, default_value_t = 120)]
    settle_max_s: u64,
    /// HTTP port of instance 0 (instance i listens on port + i).
    #[arg(long, default_value_t = 18_180)]
    port: u16,
    /// Directory of initdb and pg_ctl (default: where `initdb` is on PATH).
    #[arg(long)]
    pg_bin: Option<PathBuf>,
    /// The libfaketime library (default: the Debian package's path).
    #[arg(long)]
    libfaketime: Option<PathBuf>,
    /// Seed of the kill choices (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// A failover run: the database is a Patroni cluster in this replication mode, and the
    /// faults are kills and switchovers of its primary (`--duration-s` and the other faults'
    /// options are then unused).
    #[arg(long, value_enum)]
    ha: Option<ha::Mode>,
    /// The cluster script of `--ha`.
    #[arg(long, default_value = "scripts/ha")]
    ha_script: PathBuf,
    /// `--ha`: seconds between failovers (and before the first, and after the last).
    #[arg(long, default_value_t = 20)]
    failover_every_s: u64,
    /// `--ha`: how many times the primary is killed.
    #[arg(long, default_value_t = 3)]
    primary_kills: usize,
    /// `--ha`: how many planned switchovers.
    #[arg(long, default_value_t = 2)]
    switchovers: usize,
    /// `--ha`: before each primary kill, its WAL senders stop for this many milliseconds, so
    /// the commits of that time reach no standby (async mode's lost tail, staged).
    #[arg(long)]
    lost_tail_ms: Option<u64>,
}

/// The run's database: a cluster of its own, or a high-availability one.
#[derive(Debug, Clone)]
enum Database {
    Local(Arc<pg::Postgres>),
    Ha(Arc<ha::Cluster>),
}

impl Database {
    fn start(args: &Args) -> Result<Database> {
        Ok(match args.ha {
            Some(mode) => Database::Ha(Arc::new(ha::Cluster::up(
                &args.ha_script,
                mode,
                args.lost_tail_ms.is_some(),
            )?)),
            None => Database::Local(Arc::new(pg::Postgres::start(&pg_bin(
                args.pg_bin.clone(),
            )?)?)),
        })
    }

    fn url(&self, database: &str) -> String {
        match self {
            Database::Local(postgres) => postgres.url(database),
            Database::Ha(cluster) => cluster.url(database),
        }
    }

    fn logs(&self) -> PathBuf {
        match self {
            Database::Local(postgres) => postgres.log_path(),
            Database::Ha(cluster) => cluster.log_dir(),
        }
    }
}

/// Runs, until the end or until SIGINT or SIGTERM: then the run is dropped, and with it the
/// instances, the nats-server and the PostgreSQL cluster (each stops on drop).
#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        result = run(args) => result,
        _ = tokio::signal::ctrl_c() => bail!("interrupted; everything the run started is stopped"),
        _ = terminate.recv() => bail!("terminated; everything the run started is stopped"),
    }
}

async fn run(args: Args) -> Result<()> {
    let began = std::time::Instant::now();
    let libfaketime = fleet::find_libfaketime(args.libfaketime.as_deref())?;
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let log_dir = std::env::temp_dir().join(format!("kairos-chaos-{}", std::process::id()));
    std::fs::create_dir_all(&log_dir)?;
    let database = Database::start(&args)?;
    let db_url = database.url("kairos");
    migrate(&args.kairos, &db_url).await?;
    let nats = Arc::new(Mutex::new(kairos_testkit::NatsServer::start()));
    let nats_url = nats.lock().expect("not poisoned").url();
    let fleet = fleet::Fleet::start(fleet::Setup {
        kairos: args.kairos.clone(),
        db_url: db_url.clone(),
        nats_url: nats_url.clone(),
        port: args.port,
        libfaketime,
        skews: match database {
            Database::Local(_) => vec![None, Some("+5m".into()), Some("-5m".into())],
            Database::Ha(_) => vec![None; 3],
        },
        log_dir: log_dir.clone(),
    })
    .await
    .map_err(|err| err.context(keep_nats_log(&nats, &log_dir)))?;
    let fleet = Arc::new(fleet);
    deploy(&args, &fleet.base_url(0)).await?;
    let executor = Arc::new(executor::Executor::start(&nats_url).await?);
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(&db_url)
        .await?;
    let from = check::db_second(&pool).await? + chrono::Duration::seconds(2);
    eprintln!(
        "chaos: set up in {:.1} s; {} schedules every second, {} (seed {seed}, logs in {})",
        began.elapsed().as_secs_f64(),
        args.schedules,
        match args.ha {
            None => format!("faults for {} s", args.duration_s),
            Some(mode) => format!(
                "{} primary kills and {} switchovers every {} s ({mode:?} replication)",
                args.primary_kills, args.switchovers, args.failover_every_s
            ),
        },
        log_dir.display()
    );
    let (duration, tally) = match &database {
        Database::Local(postgres) => {
            let plan = faults::Plan {
                duration: Duration::from_secs(args.duration_s),
                kill_every: Duration::from_secs(args.kill_every_s),
                stop_for: Duration::from_secs(args.stop_s),
                nats_for: Duration::from_secs(args.nats_outage_s),
                seed,
            };
            let targets = faults::Targets {
                fleet: fleet.clone(),
                executor: executor.clone(),
                nats: nats.clone(),
                postgres: postgres.clone(),
            };
            (plan.duration, faults::run(&plan, &targets).await)
        }
        Database::Ha(cluster) => {
            let plan = failovers::Plan {
                every: Duration::from_secs(args.failover_every_s),
                kills: args.primary_kills,
                switchovers: args.switchovers,
                lost_tail: args.lost_tail_ms.map(Duration::from_millis),
            };
            let tally = failovers::run(&plan, &fleet, &executor, cluster).await;
            (plan.duration(), tally)
        }
    };
    // A fresh pool: the old one's sessions ended with the PostgreSQL restart.
    pool.close().await;
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(&db_url)
        .await?;
    let window = check::Window {
        from,
        to: check::db_second(&pool).await? - chrono::Duration::seconds(1),
    };
    eprintln!(
        "chaos: faults over at {:.1} s",
        began.elapsed().as_secs_f64()
    );
    let settle = check::settle(&pool, window, Duration::from_secs(args.settle_max_s)).await?;
    fleet.stop_all();
    let stream_messages = drain(&nats_url, &executor).await?;
    executor.stop();
    let seen = executor.seen();
    let findings = check::check(
        &pool,
        window,
        args.schedules,
        args.start_timeout_s as i64,
        &seen,
        stream_messages,
    )
    .await?;
    eprintln!("chaos: checked at {:.1} s", began.elapsed().as_secs_f64());
    let run = report::Run {
        schedules: args.schedules,
        duration,
        settle,
        received: seen.len(),
        report_retries: executor.report_retries(),
        seed,
    };
    if !report::print(&run, &findings, &tally) {
        bail!(
            "chaos run failed (instance logs: {}; PostgreSQL log: {}; {})",
            log_dir.display(),
            database.logs().display(),
            keep_nats_log(&nats, &log_dir)
        );
    }
    let _ = std::fs::remove_dir_all(&log_dir);
    Ok(())
}

/// Copies the run's nats-server log next to the instance logs (the server's own copy goes
/// with its temporary directory) and says whether the server is still running.
fn keep_nats_log(nats: &Mutex<kairos_testkit::NatsServer>, log_dir: &std::path::Path) -> String {
    let mut nats = nats.lock().expect("not poisoned");
    let kept = log_dir.join("nats-server.log");
    match std::fs::copy(nats.log_path(), &kept) {
        Ok(_) => format!("nats-server {}, its log: {}", nats.state(), kept.display()),
        Err(err) => format!("nats-server {}, its log not kept: {err}", nats.state()),
    }
}

/// The directory of `initdb` and `pg_ctl`.
fn pg_bin(explicit: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(dir) = explicit {
        return Ok(dir);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/lib/postgresql/15/bin")])
        .find(|dir| dir.join("initdb").exists() && dir.join("pg_ctl").exists())
        .context("initdb and pg_ctl not found on PATH: pass --pg-bin")
}

/// `kairos migrate` on the run's database (it creates the database first).
async fn migrate(kairos: &str, db_url: &str) -> Result<()> {
    let migrated = tokio::process::Command::new(kairos)
        .arg("migrate")
        .env("DATABASE_URL", db_url)
        .status()
        .await
        .with_context(|| format!("run {kairos} migrate"))?;
    if !migrated.success() {
        bail!("{kairos} migrate failed");
    }
    Ok(())
}

/// Registers the schedules by deploy sync: workflow `chaos`, version 1, schedules
/// `chaos-0` … every second, overlap `allow`, catch-up `fire_immediately`.
async fn deploy(args: &Args, base_url: &str) -> Result<()> {
    let schedules: Vec<serde_json::Value> = (0..args.schedules)
        .map(|i| {
            serde_json::json!({
                "schedule_id": format!("chaos-{i}"),
                "user_id": "chaos",
                "cron_expr": "* * * * * *",
                "timezone": "UTC",
                "overlap_policy": "allow",
                "catchup_policy": "fire_immediately",
                "start_timeout_s": args.start_timeout_s,
            })
        })
        .collect();
    let client = reqwest::Client::new();
    kairos_testkit::deploy::workflow(
        &client,
        base_url,
        "chaos",
        schedules,
        Duration::from_secs(120),
    )
    .await
    .map_err(anyhow::Error::msg)
}

/// Once no instance publishes any more: waits until the executor received every message
/// of the launch stream (at most 30 s) and returns the stream's message count.
async fn drain(nats_url: &str, executor: &executor::Executor) -> Result<u64> {
    let client = async_nats::connect(nats_url).await?;
    let mut stream = jetstream::new(client).get_stream("KAIROS_LAUNCH").await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let messages = stream.info().await?.state.messages;
    for _ in 0..300 {
        if executor.received() as u64 >= messages {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(messages)
}
