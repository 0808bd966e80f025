//! `kairos calendars put|get|delete|list`: named exclusion calendars over the HTTP API
//! (`/calendars`); a change re-plans every schedule that uses the calendar. `list` prints a
//! table, `put` and `get` one field per line; `--json` prints the API's answer.

use std::path::PathBuf;

use anyhow::Context;
use reqwest::Method;
use serde_json::{json, Value};

use crate::admin::{block_on, call, segment, Request};
use crate::global::Global;

/// Arguments of `kairos calendars`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    verb: Verb,
    /// The API's address, token and `--json`.
    #[command(flatten)]
    pub api: Global,
}

#[derive(Debug, clap::Subcommand)]
enum Verb {
    /// Create or replace a calendar from dates given here and/or in a file.
    Put {
        /// The calendar's name.
        name: String,
        /// A date to exclude (YYYY-MM-DD). Repeatable.
        #[arg(long = "date")]
        dates: Vec<String>,
        /// A file with the calendar's body (`{"dates": [...], "description": ...}`), as
        /// `kairos preview --calendar-file` reads it.
        #[arg(long)]
        file: Option<PathBuf>,
        /// What the calendar is (shown by get and list).
        #[arg(long)]
        description: Option<String>,
    },
    /// Show one calendar.
    Get {
        /// The calendar's name.
        name: String,
    },
    /// Delete a calendar (refused while a schedule uses it).
    Delete {
        /// The calendar's name.
        name: String,
    },
    /// List the calendars.
    List,
}

/// Runs one verb against the API and prints its answer.
///
/// # Errors
/// An unreadable file, an unreachable API, or a refusal (the problem's detail).
pub fn run(args: &Args) -> anyhow::Result<()> {
    let global = &args.api;
    let request = request(&args.verb)?;
    let answer = block_on(call(&global.url, global.token.as_deref(), request))?;
    match (answer, global.json) {
        (Some(body), true) => println!("{}", serde_json::to_string_pretty(&body)?),
        (Some(body), false) if matches!(args.verb, Verb::List) => {
            print!("{}", crate::show::calendars_table(&body));
        }
        (Some(body), false) => println!("{}", crate::show::fields(&body)),
        (None, true) => {}
        (None, false) => match &args.verb {
            Verb::Delete { name } => println!("deleted calendar {name}"),
            _ => println!("done"),
        },
    }
    Ok(())
}

fn request(verb: &Verb) -> anyhow::Result<Request> {
    Ok(match verb {
        Verb::Put {
            name,
            dates,
            file,
            description,
        } => {
            let mut body = match file {
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .with_context(|| format!("read {}", path.display()))?;
                    serde_json::from_str::<Value>(&text)
                        .with_context(|| format!("{} is not JSON", path.display()))?
                }
                None => json!({ "dates": [] }),
            };
            if let Some(list) = body["dates"].as_array_mut() {
                list.extend(dates.iter().map(|date| json!(date)));
            } else if !dates.is_empty() {
                body["dates"] = json!(dates);
            }
            if let Some(description) = description {
                body["description"] = json!(description);
            }
            let path = format!("/calendars/{}", segment(name));
            (Method::PUT, path, Vec::new(), Some(body))
        }
        Verb::Get { name } => (
            Method::GET,
            format!("/calendars/{}", segment(name)),
            Vec::new(),
            None,
        ),
        Verb::Delete { name } => (
            Method::DELETE,
            format!("/calendars/{}", segment(name)),
            Vec::new(),
            None,
        ),
        Verb::List => (Method::GET, "/calendars".to_string(), Vec::new(), None),
    })
}
