//! The `kairos` binary: parses the command line and hands each verb to its module.
//! No business logic lives here. The commands that talk to the API take the flags of
//! [`global::Global`] (`--url`, `--token`, `--json`) anywhere after the command.

mod admin;
mod calendars;
mod config;
mod global;
mod migrate;
mod nats_roles;
mod otlp;
mod preview;
mod serve;
mod show;
mod status_role;
mod workflows;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// kairos — a workflow trigger service: cron schedules in, exactly-once launches out.
#[derive(Debug, Parser)]
#[command(
    name = "kairos",
    version,
    after_help = "schedules, workflows, calendars and runs take --url, --token and --json \
                  anywhere after the command; KAIROS_URL and KAIROS_TOKEN set the first two \
                  from the environment."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the next fire times of a schedule spec, offline (no database, no NATS: a stored
    /// schedule's skipped occurrences and pause are not known: `GET /schedules/{id}?explain=true`
    /// shows them).
    Preview(preview::Args),
    /// Run the service: api, planner, dispatcher, status and retention roles.
    Serve(serve::Args),
    /// Apply the database migrations and exit.
    Migrate(migrate::Args),
    /// List, show, change, trigger and backfill schedules.
    Schedules(admin::Args),
    /// Deploy a workflow version (its DAG and schedules) and show a stored one.
    Workflows(workflows::Args),
    /// Named exclusion calendars: put, get, delete and list them.
    Calendars(calendars::Args),
    /// List a schedule's runs, retry or cancel a run, list dead letters.
    Runs(admin::RunsArgs),
    /// Print a shell completion script (bash, zsh or fish) to standard output.
    Completions {
        /// The shell to complete in, e.g. `kairos completions bash > /etc/bash_completion.d/kairos`.
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Preview(args) => preview::run(&args),
        Command::Serve(args) => exit(serve::run(&args)),
        Command::Migrate(args) => exit(migrate::run(&args)),
        Command::Schedules(args) => exit(admin::run(&args)),
        Command::Workflows(args) => exit(workflows::run(&args)),
        Command::Runs(args) => exit(admin::run_runs(&args)),
        Command::Calendars(args) => exit(calendars::run(&args)),
        Command::Completions { shell } => exit(completions(shell)),
    }
}

/// Writes the completion script of `shell` to standard output (a closed pipe, as in
/// `kairos completions bash | head`, is not an error).
fn completions(shell: clap_complete::Shell) -> anyhow::Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "kairos", &mut script);
    match std::io::Write::write_all(&mut std::io::stdout(), &script) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(err).context("write the completion script"))
        }
        _ => Ok(()),
    }
}

/// Exit 1 with the whole error chain on stderr.
fn exit(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("kairos: {}", said_once(&err));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes joined by ": ", each said once: a cause whose words the one
/// before already holds (an I/O error a client error repeats) is left out.
fn said_once(err: &anyhow::Error) -> String {
    let mut said: Vec<String> = Vec::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if !said.last().is_some_and(|last| last.contains(&text)) {
            said.push(text);
        }
    }
    said.join(": ")
}

#[cfg(test)]
mod tests {
    use super::said_once;

    #[test]
    fn a_cause_the_message_before_already_holds_is_said_once() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let wrapped = anyhow::Error::new(io)
            .context("error communicating with database: refused")
            .context("connect to PostgreSQL");
        assert_eq!(
            said_once(&wrapped),
            "connect to PostgreSQL: error communicating with database: refused"
        );
    }
}
