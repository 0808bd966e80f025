//! The `kairos` binary: parses the command line and hands each verb to its module.
//! No business logic lives here.

mod admin;
mod calendars;
mod config;
mod dispatch;
mod migrate;
mod otlp;
mod preview;
mod serve;
mod show;

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
    /// Run the service: api, planner, dispatcher, status and retention roles.
    Serve(serve::Args),
    /// Apply the database migrations and exit.
    Migrate(migrate::Args),
    /// Admin verbs on schedules, over the HTTP API.
    Schedules(admin::Args),
    /// Named exclusion calendars (`put`, `get`, `delete`, `list`), over the HTTP API.
    Calendars(calendars::Args),
    /// Admin verbs on runs (`runs list`, `runs retry`, `runs cancel`, `runs dead-letters`), over
    /// the HTTP API.
    Runs(admin::RunsArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Preview(args) => preview::run(&args),
        Command::Serve(args) => exit(serve::run(&args)),
        Command::Migrate(args) => exit(migrate::run(&args)),
        Command::Schedules(args) => exit(admin::run(&args)),
        Command::Runs(args) => exit(admin::run_runs(&args)),
        Command::Calendars(args) => exit(calendars::run(&args)),
    }
}

/// Exit 1 with the whole error chain on stderr.
fn exit(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("kairos: {err:#}");
            ExitCode::FAILURE
        }
    }
}
