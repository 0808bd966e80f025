//! `kairos-executor`: the example executor's command line. See README.md beside it.

use clap::Parser;
use std::time::Duration;

use kairos_executor_example::{run, Reporter, Settings, DEFAULT_HEARTBEAT_EVERY};

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
        heartbeat_every: match args.heartbeat_every {
            Some(seconds) => Duration::try_from_secs_f64(seconds)
                .ok()
                .filter(|every| !every.is_zero())
                .ok_or_else(|| anyhow::anyhow!("--heartbeat-every must be above 0"))?,
            None => DEFAULT_HEARTBEAT_EVERY,
        },
    };
    let reporter = match args.kairos_url {
        Some(base_url) => Reporter::Http {
            client: reqwest::Client::new(),
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
