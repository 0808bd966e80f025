//! `kairos-executor`: the example executor's command line. See README.md beside it.

use clap::Parser;
use std::time::Duration;

use kairos_executor_example::{
    run, Deliver, Reporter, Settings, DEFAULT_ACK_WAIT, DEFAULT_CONCURRENCY,
    DEFAULT_HEARTBEAT_EVERY,
};

/// The longest a status report over HTTP may take.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// Consume kairos launch messages, run their DAGs, report status.
#[derive(Debug, Parser)]
struct Args {
    /// NATS server.
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    nats_url: String,
    /// Launch stream.
    #[arg(long, default_value = "KAIROS_LAUNCH")]
    stream: String,
    /// Durable consumer name (executors with the same name share the work).
    #[arg(long, default_value = "example-executor")]
    durable: String,
    /// This executor's id.
    #[arg(long, default_value = "example-executor-1")]
    executor_id: String,
    /// Report status over HTTP to this kairos URL; without it, on the NATS status subject.
    #[arg(long)]
    kairos_url: Option<String>,
    /// Bearer token for HTTP status reports (role executor).
    #[arg(long, env = "KAIROS_TOKEN")]
    token: Option<String>,
    /// kairos's subject prefix: NATS status reports and cancel requests.
    #[arg(long, default_value = "kairos")]
    subject_prefix: String,
    /// Seconds between HEARTBEAT reports while a run works (default 10).
    #[arg(long)]
    heartbeat_every: Option<f64>,
    /// Runs worked on at once (default 4).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    concurrency: Option<u32>,
    /// The durable's ack wait in seconds, set when this executor creates it (default 30).
    #[arg(long)]
    ack_wait_s: Option<f64>,
    /// Where a durable this executor creates starts: new (launches published from now on)
    /// or all (the whole stream).
    #[arg(long, default_value = "new", value_parser = ["new", "all"])]
    deliver_policy: String,
}

/// `seconds` as a duration above zero, or an error naming `flag`.
fn positive_seconds(
    flag: &str,
    seconds: Option<f64>,
    default: Duration,
) -> anyhow::Result<Duration> {
    match seconds {
        Some(seconds) => Duration::try_from_secs_f64(seconds)
            .ok()
            .filter(|every| !every.is_zero())
            .ok_or_else(|| anyhow::anyhow!("--{flag} must be above 0, got {seconds}")),
        None => Ok(default),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let settings = Settings {
        nats_url: args.nats_url.clone(),
        stream: args.stream,
        durable: args.durable,
        executor_id: args.executor_id,
        subject_prefix: args.subject_prefix.clone(),
        heartbeat_every: positive_seconds(
            "heartbeat-every",
            args.heartbeat_every,
            DEFAULT_HEARTBEAT_EVERY,
        )?,
        concurrency: args.concurrency.map_or(DEFAULT_CONCURRENCY, |n| n as usize),
        ack_wait: positive_seconds("ack-wait-s", args.ack_wait_s, DEFAULT_ACK_WAIT)?,
        deliver: if args.deliver_policy == "all" {
            Deliver::All
        } else {
            Deliver::New
        },
    };
    let reporter = match args.kairos_url {
        Some(base_url) => Reporter::Http {
            // A report that hangs would hold its run's slot (and, through the progress
            // acks, its message) for ever: give up after a while, like a lost report.
            client: reqwest::Client::builder().timeout(HTTP_TIMEOUT).build()?,
            base_url,
            token: args.token,
        },
        None => {
            let client = async_nats::connect(&args.nats_url).await?;
            Reporter::Nats {
                jetstream: async_nats::jetstream::new(client),
                prefix: args.subject_prefix,
            }
        }
    };
    run(&settings, &reporter).await
}
