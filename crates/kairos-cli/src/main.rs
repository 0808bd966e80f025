//! The `kairos` binary: parses the command line and hands each verb to its module.
//! No business logic lives here.

mod preview;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// kairos — a workflow trigger service: cron schedules in, exactly-once launches out.
#[derive(Debug, Parser)]
#[command(name = "kairos", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the next fire times of a schedule spec, offline (no database, no NATS).
    Preview(preview::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Preview(args) => preview::run(&args),
    }
}
