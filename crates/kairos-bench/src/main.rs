//! `kairos-bench`: what a burst of ticks costs, end to end, on this machine.
//!
//! It uses the configured PostgreSQL and NATS (a scratch database and scratch streams of its
//! own, so nothing of a real deployment is touched), starts `--instances` `kairos serve`
//! processes, registers `--schedules` schedules by one deploy sync, optionally stores
//! `--stored` schedules that are not due, waits for `--marks` tick marks, and prints one
//! table: publish side (the stream's store time of each launch - its tick: first, p50, p99, last), consumer side (a
//! JetStream consumer's receive time - `scheduled_for`: p50, p99), duplicates, missing,
//! kairos's CPU and RSS, and the raw limits of the same machine (pipelined JetStream
//! publishing without PostgreSQL; batched PostgreSQL status updates without NATS).
//!
//! Modes: `burst` (every schedule on the same tick), `spread` (each schedule on its own
//! second of the minute), `stored` (a burst with many schedules stored that are not due),
//! `loop` (a burst, and an executor in the bench's process that reports on every run: the
//! return path, until each run is final in the database, and where the machine's cores went
//! meanwhile: PostgreSQL, nats-server, kairos, the bench; and applied - sent by when the
//! launch was received; with `--spread`, each schedule on its own second instead, every figure
//! from each run's own tick), `intake` (the status intake's
//! capacity: runs written as published, every report sent at once, the time to apply them),
//! `queue` (a queue behind a long run, and writes of schedules that fire every second),
//! `floor` (the core-seconds one loop mark's work takes at the machine's raw limits, with no
//! kairos, beside what the loop's targets leave; `loop` prints it too).

mod executor;
mod floor;
mod intake;
mod leader_kill;
mod loops;
mod machine;
mod queued;
mod received;

mod consume;
mod deploy;
mod fleet;
mod limits;
mod outcome;
mod percentile;
mod report;
mod setup;

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};

/// The workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Every schedule fires on the same tick mark.
    Burst,
    /// Each schedule fires once a minute on its own second (`S * * * * *`).
    Spread,
    /// A burst while `--stored` schedules that are not due sit in the table.
    Stored,
    /// A burst per mark, every run reported on by the bench's executor: the whole loop.
    Loop,
    /// `--schedules` runs written as published, `STARTED` and `SUCCESS` sent for each as
    /// fast as the bench can publish: how many reports a second the intake applies.
    Intake,
    /// A `queue` schedule behind one long run while schedules fire every second, and
    /// upserts and deploys of a firing schedule meanwhile.
    Queue,
    /// No kairos: the core-seconds PostgreSQL and nats-server spend on one loop mark's work
    /// of `--schedules` runs at their raw limits, beside what the loop's targets leave.
    Floor,
}

/// The bench's command line.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "kairos-bench",
    about = "Measure a burst of kairos ticks end to end"
)]
pub struct Args {
    /// The workload.
    #[arg(value_enum, default_value = "burst")]
    pub mode: Mode,
    /// `kairos serve` processes to start.
    #[arg(long, default_value_t = 3)]
    pub instances: usize,
    /// Schedules registered by deploy sync (the ones that fire).
    #[arg(long, default_value_t = 10_000)]
    pub schedules: usize,
    /// Schedules stored but not due (mode `stored`), written straight into the table.
    #[arg(long, default_value_t = 1_000_000)]
    pub stored: usize,
    /// Tick marks to measure (minutes; or periods of `--every-s`).
    #[arg(long, default_value_t = 2)]
    pub marks: usize,
    /// Mode `loop`: each schedule fires once a minute on its own second (`S * * * * *`),
    /// as in mode `spread`: 100,000 a minute as a rate rather than a burst. Each mark is a
    /// whole minute, and every figure is taken from each run's own tick.
    #[arg(long)]
    pub spread: bool,
    /// Fire every N seconds (a divisor of 60) instead of every minute, in mode `burst`
    /// (`*/N * * * * *`), so a short run needs no minute-long waits.
    #[arg(long)]
    pub every_s: Option<u32>,
    /// The `kairos` binary to start.
    #[arg(long, default_value = "target/release/kairos")]
    pub kairos: String,
    /// PostgreSQL server (the bench creates and drops its own database there).
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/postgres"
    )]
    pub database_url: String,
    /// Use this NATS server (JetStream) instead of starting one. Its streams
    /// `KAIROS_LAUNCH`, `KAIROS_STATUS` and `KAIROS_DLQ` are used and emptied: never point
    /// it at a server a real deployment uses.
    #[arg(long)]
    pub nats_url: Option<String>,
    /// Start a JetStream cluster of this many `nats-server` nodes (at least 3) instead of
    /// one server, and give the instances `nats.replicas` = its size: every stream is
    /// replicated on every node.
    #[arg(long, conflicts_with = "nats_url")]
    pub nats_cluster: Option<usize>,
    /// With `--nats-cluster`: kill (SIGKILL) the launch stream's leader this many
    /// milliseconds after the first measured tick, in the middle of its burst.
    #[arg(long, requires = "nats_cluster")]
    pub kill_stream_leader_ms: Option<u64>,
    /// The instances run with `nats.status_partitions` = N (0: one status consumer shared
    /// by all); without it, with the default. The executor reports on the subject each
    /// launch message names.
    #[arg(long)]
    pub status_partitions: Option<u16>,
    /// The nats-server binary the bench starts (with JetStream, its store in a temporary
    /// directory) when no `--nats-url` is given.
    #[arg(long, default_value = "nats-server")]
    pub nats_server: String,
    /// First HTTP port of the instances (instance i listens on port + i).
    #[arg(long, default_value_t = 18_080)]
    pub port: u16,
    /// The schedules' overlap policy (`allow`, `skip`, `queue`, ...).
    #[arg(long, default_value = "allow")]
    pub overlap: String,
    /// Mode `loop`: heartbeats the executor sends per run between STARTED and its end.
    #[arg(long, default_value_t = 0)]
    pub heartbeats: usize,
    /// Mode `loop`: share (0 to 1) of first attempts the executor reports FAILED; the
    /// schedules then allow a second attempt, one second later.
    #[arg(long, default_value_t = 0.0)]
    pub fail_share: f64,
    /// Mode `queue`: how long the queued schedule's first run is held `STARTED`.
    #[arg(long, default_value_t = 30)]
    pub hold_s: u64,
    /// Mode `queue`: how long the scenario runs (writes go on meanwhile).
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// Skip the raw-limit measurements.
    #[arg(long)]
    pub no_limits: bool,
    /// Exit non-zero unless every tick was written once, published and received exactly
    /// once (no timing is checked).
    #[arg(long)]
    pub check: bool,
}

impl Args {
    fn check(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.fail_share) {
            bail!("--fail-share must be between 0 and 1");
        }
        if self.instances == 0 || self.schedules == 0 || self.marks == 0 {
            bail!("--instances, --schedules and --marks must be at least 1");
        }
        if self.nats_cluster.is_some_and(|size| size < 3) {
            bail!("--nats-cluster must be at least 3 (a replicated stream needs a quorum)");
        }
        if self.spread && self.mode != Mode::Loop {
            bail!(
                "--spread is for mode loop (mode spread is the same workload without an executor)"
            );
        }
        if self.spread && self.every_s.is_some() {
            bail!(
                "--spread and --every-s exclude each other: a spread schedule fires once a minute"
            );
        }
        if let Some(every) = self.every_s {
            if every == 0 || 60 % every != 0 {
                bail!("--every-s must divide 60 (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)");
            }
        }
        Ok(())
    }

    /// Whether each schedule fires on its own second of the minute (mode `spread`, or
    /// `loop --spread`), so a mark is a whole minute of ticks.
    pub fn spread(&self) -> bool {
        self.mode == Mode::Spread || self.spread
    }

    /// The period between tick marks.
    pub fn period(&self) -> Duration {
        match (self.mode, self.every_s) {
            (Mode::Burst | Mode::Loop, Some(every)) => Duration::from_secs(every.into()),
            _ => Duration::from_secs(60),
        }
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    args.check()?;
    let scratch = setup::Scratch::create(&args)
        .await
        .context("set up scratch database and streams")?;
    if args.mode == Mode::Floor {
        let floor = floor::measure(&args, &scratch).await?;
        floor::print(&floor);
        scratch.drop_all().await?;
        return if args.check {
            floor::check(&floor)
        } else {
            Ok(())
        };
    }
    if args.mode == Mode::Stored {
        setup::store_idle_schedules(&scratch.pool, args.stored).await?;
    }
    let mut fleet = fleet::Fleet::start(&args, &scratch).await?;
    if args.mode == Mode::Intake {
        let figures = intake::measure(&args, &scratch).await?;
        let usage = fleet.usage();
        let urls: Vec<String> = (0..args.instances).map(|i| fleet.base_url(i)).collect();
        let batches = loops::batches(&urls).await;
        fleet.shutdown().await;
        let limits = match args.no_limits {
            true => None,
            false => Some(limits::measure(&args, &scratch).await?),
        };
        intake::print(&args, &figures, &usage, limits.as_ref());
        loops::print_batches(batches);
        scratch.drop_all().await?;
        if args.check && figures.unapplied > 0 {
            bail!(
                "{} run(s) not SUCCESS after every report was sent",
                figures.unapplied
            );
        }
        return Ok(());
    }
    if args.mode == Mode::Queue {
        let outcome = queued::run(&args, &scratch, &fleet).await;
        fleet.shutdown().await;
        scratch.drop_all().await?;
        return outcome;
    }
    let deploy = deploy::schedules(&args, &mut fleet).await?;
    let (consumer, executor) = match args.mode {
        Mode::Loop => (
            None,
            Some(executor::Executor::start(&args, &scratch).await?),
        ),
        _ => (Some(consume::Consumer::start(&args, &scratch).await?), None),
    };
    let marks = outcome::await_marks(&args, &scratch, &mut fleet, executor.as_ref()).await?;
    let expected = marks.iter().map(|m| m.expected).sum();
    let (from, to) = (marks[0].from, marks[marks.len() - 1].to);
    let received = match (consumer, executor) {
        (Some(consumer), _) => consumer.finish(expected, from, to).await,
        (None, Some(executor)) => executor.finish().into_iter().map(|r| r.received).collect(),
        (None, None) => Vec::new(),
    };
    let usage = fleet.usage();
    let urls: Vec<String> = (0..args.instances).map(|i| fleet.base_url(i)).collect();
    let batches = loops::batches(&urls).await;
    fleet.shutdown().await;
    let (in_stream, published) = consume::stream_matches_database(&scratch).await?;
    let limits = if args.no_limits {
        None
    } else {
        Some(limits::measure(&args, &scratch).await?)
    };
    let faults = report::print(&args, &deploy, &marks, &received, &usage, limits.as_ref());
    if args.mode == Mode::Loop {
        let rows: Vec<(&str, &loops::LoopFigures)> = marks
            .iter()
            .filter_map(|mark| Some((mark.label.as_str(), mark.loop_figures.as_ref()?)))
            .collect();
        loops::print(&args, &rows, limits.as_ref().map(|l| l.pg_per_s), batches);
        if !args.no_limits {
            floor::print(&floor::measure(&args, &scratch).await?);
        }
    }
    println!(
        "launch stream: {in_stream} messages for {published} runs published (all marks, \
         including any before the measured ones)"
    );
    let stream_faults = in_stream.abs_diff(u64::try_from(published).unwrap_or(0));
    scratch.drop_all().await?;
    if args.check && (faults > 0 || stream_faults > 0) {
        bail!(
            "{faults} tick(s) missing, unpublished or duplicated in the measured marks; \
             stream and database differ by {stream_faults}"
        );
    }
    Ok(())
}
