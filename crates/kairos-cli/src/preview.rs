//! `kairos preview EXPR --tz ZONE [-n N] [--after RFC3339] [--json]`: offline evaluation of a
//! spec with the same core the planner uses. Exit 2 with one line on stderr for bad input.

use std::process::ExitCode;

use chrono::{DateTime, SecondsFormat, Utc};
use kairos_core::{parse_zone, Spec, Timetable};

/// Arguments of `kairos preview`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Cron expression, `@every <duration>` or `@at <RFC3339>` (quote it).
    expr: String,
    /// IANA time zone the expression is read in.
    #[arg(long, default_value = "UTC")]
    tz: String,
    /// How many fire times to print.
    #[arg(short = 'n', long = "count", default_value_t = 5)]
    count: usize,
    /// Print fire times strictly after this instant (RFC 3339); default: now.
    /// Also the anchor of `@every`.
    #[arg(long)]
    after: Option<String>,
    /// Print `{"fire_times": [...]}` instead of one time per line.
    #[arg(long)]
    json: bool,
}

/// Runs the preview; exit code 2 on invalid input.
pub fn run(args: &Args) -> ExitCode {
    match fire_times(args) {
        Ok(times) => {
            print(args, &times);
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("kairos preview: {message}");
            ExitCode::from(2)
        }
    }
}

fn fire_times(args: &Args) -> Result<Vec<String>, String> {
    let spec = Spec::parse(&args.expr).map_err(|err| err.to_string())?;
    let zone = parse_zone(&args.tz).map_err(|err| err.to_string())?;
    let after = match &args.after {
        Some(text) => DateTime::parse_from_rfc3339(text)
            .map_err(|_| {
                format!("--after {text:?} is not an RFC 3339 time (e.g. 2025-03-08T12:00:00Z)")
            })?
            .with_timezone(&Utc),
        None => Utc::now(),
    };
    let timetable = Timetable::new(spec, zone, after);
    Ok(timetable
        .ticks_after(after)
        .take(args.count)
        .map(|at| at.to_rfc3339_opts(SecondsFormat::Secs, true))
        .collect())
}

fn print(args: &Args, times: &[String]) {
    if args.json {
        let body = serde_json::json!({ "fire_times": times });
        println!("{body}");
    } else {
        for time in times {
            println!("{time}");
        }
    }
}
