//! `kairos schedules list|get|pause|resume|delete|trigger|backfill|history|upsert|skip|skips|unskip`
//! and `kairos runs list|get|logs|retry|cancel|dead-letters|late`: admin verbs over the HTTP API, so
//! they obey the same auth and validation as every other caller and show exactly what the API
//! answers. Listings print
//! a table, one thing a field per line (`show.rs`); `--json` prints the answer as it came
//! (nothing for a change the API answers with no body). A refusal prints the problem's detail
//! (and each field error) and exits non-zero.

use anyhow::{bail, Context};
use reqwest::{Method, Response, StatusCode};
use serde_json::{json, Value};

use crate::global::Global;

/// Arguments of `kairos schedules`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    verb: Verb,
    /// The API's address, token and `--json`.
    #[command(flatten)]
    pub api: Global,
}

/// Arguments of `kairos runs`.
#[derive(Debug, clap::Args)]
pub struct RunsArgs {
    #[command(subcommand)]
    verb: RunsVerb,
    /// The API's address, token and `--json`.
    #[command(flatten)]
    pub api: Global,
}

#[derive(Debug, clap::Subcommand)]
enum RunsVerb {
    /// Runs across schedules, newest tick first (`GET /runs`; a schedule's runs also after
    /// it was deleted); pass the printed next_cursor as --cursor for the next page.
    List {
        /// Only this schedule's runs.
        #[arg(long)]
        schedule: Option<String>,
        /// Only this workflow's runs.
        #[arg(long)]
        workflow: Option<String>,
        /// Only runs in this status (PENDING, QUEUED, ENQUEUED, STARTED, SUCCESS, FAILED,
        /// TIMED_OUT, SKIPPED, CANCELLED, RETRYING, CANCELLING).
        #[arg(long)]
        status: Option<String>,
        /// Only runs in this phase: in_flight, failed, dead_letter or late (not with --status).
        #[arg(long)]
        phase: Option<String>,
        /// Only runs created this way: schedule, manual, backfill, api or chain.
        #[arg(long)]
        source: Option<String>,
        /// Only ticks at or after this (RFC 3339).
        #[arg(long, value_name = "TIME")]
        from: Option<String>,
        /// Only ticks at or before this (RFC 3339).
        #[arg(long, value_name = "TIME")]
        to: Option<String>,
        /// Most runs to show (1..=1000).
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// The next_cursor of the previous page.
        #[arg(long)]
        cursor: Option<String>,
    },
    /// One run with every attempt: its errors, executors and times (`GET /runs/{key}`).
    Get {
        /// The run's idempotency key.
        key: String,
    },
    /// The logs executors reported for a run: each attempt's link to its logs and the tail
    /// of its output (from `GET /runs/{key}`).
    Logs {
        /// The run's idempotency key.
        key: String,
        /// Only this attempt's logs.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        attempt: Option<u32>,
    },
    /// Start one more attempt of a FAILED or TIMED_OUT run, due now (deployer token).
    Retry {
        /// The run's idempotency key.
        key: String,
        /// Makes the request idempotent: the same id again starts no second attempt.
        #[arg(long)]
        request_id: Option<String>,
    },
    /// Cancel a run (deployer token): an unpublished one at once, a published one is
    /// CANCELLING until its executor confirms or the cancel times out.
    Cancel {
        /// The run's idempotency key.
        key: String,
        /// Why; written on the run and sent to the executor.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Runs whose last attempt failed, newest first (`GET /dead-letters`).
    DeadLetters {
        /// Only this schedule's.
        #[arg(long)]
        schedule: Option<String>,
        /// Only this workflow's.
        #[arg(long)]
        workflow: Option<String>,
        /// The next_cursor of the previous page.
        #[arg(long)]
        cursor: Option<String>,
        /// Page size (1..=1000).
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Runs not SUCCESS by their deadline, newest mark first (`GET /runs?late=true`).
    Late {
        /// Only this schedule's.
        #[arg(long)]
        schedule: Option<String>,
        /// Only this workflow's.
        #[arg(long)]
        workflow: Option<String>,
        /// The next_cursor of the previous page.
        #[arg(long)]
        cursor: Option<String>,
        /// Page size (1..=1000).
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
}

#[derive(Debug, clap::Subcommand)]
enum Verb {
    /// List schedules (one page; pass the printed next_cursor as --cursor for the next).
    List {
        /// Only schedules whose schedule, workflow or user id contains this text (any case).
        #[arg(long, visible_alias = "q")]
        search: Option<String>,
        /// Only this workflow's schedules.
        #[arg(long)]
        workflow_id: Option<String>,
        /// Only this user's schedules.
        #[arg(long)]
        user_id: Option<String>,
        /// Only paused (true) or only active (false) schedules.
        #[arg(long)]
        paused: Option<bool>,
        /// The next_cursor of the previous page.
        #[arg(long)]
        cursor: Option<String>,
        /// Page size (1..=1000).
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// Show one schedule with its next five fire times and its stats (last fire, missed and
    /// skipped ticks, why the last tick did not launch).
    Get {
        /// The schedule id.
        id: String,
    },
    /// Pause a schedule (its unpublished runs are cancelled).
    Pause {
        /// The schedule id.
        id: String,
        /// Why it is paused (at most 1,000 characters), shown by `get` and `list` until
        /// resume.
        #[arg(long)]
        note: Option<String>,
        /// Resume by itself at this time (RFC 3339, in the future), catching up per the
        /// schedule's catch-up policy as a resume would; without it, until `resume`.
        #[arg(long)]
        until: Option<String>,
    },
    /// Skip one future fire time of a schedule (`POST /schedules/{id}/skips`): its run
    /// becomes SKIPPED with the reason "skipped by <who>: <note>".
    Skip {
        /// The schedule id.
        id: String,
        /// The fire time to skip, RFC 3339.
        run_at: String,
        /// Why (at most 1,000 characters).
        #[arg(long)]
        note: Option<String>,
    },
    /// List a schedule's skips, past and future (`GET /schedules/{id}/skips`).
    Skips {
        /// The schedule id.
        id: String,
    },
    /// Take back a skip before its tick fires (`DELETE /schedules/{id}/skips/{run_at}`).
    Unskip {
        /// The schedule id.
        id: String,
        /// The skipped fire time, RFC 3339.
        run_at: String,
    },
    /// Resume a paused schedule (from now on; the paused span is not caught up).
    Resume {
        /// The schedule id.
        id: String,
    },
    /// Delete a schedule (its run history stays).
    Delete {
        /// The schedule id.
        id: String,
    },
    /// Run a schedule now, also while it is paused (`POST /schedules/{id}/trigger`).
    Trigger {
        /// The schedule id.
        id: String,
        /// Makes the request idempotent: the same id again creates no second run
        /// (default: a new id per call).
        #[arg(long)]
        request_id: Option<String>,
        /// This run's overlap policy instead of the schedule's (allow, skip, queue).
        #[arg(long)]
        overlap_policy: Option<String>,
    },
    /// Create the runs of every tick in [from, to] (`POST /schedules/{id}/backfill`).
    Backfill {
        /// The schedule id.
        id: String,
        /// First tick, RFC 3339.
        #[arg(long)]
        from: String,
        /// Last tick, RFC 3339.
        #[arg(long)]
        to: String,
        /// The runs' overlap policy (default queue: every tick runs, in tick order).
        #[arg(long)]
        overlap_policy: Option<String>,
    },
    /// A schedule's history of changes, newest first: who changed what, when, in which
    /// request and why (`GET /schedules/{id}/history`; also after it was deleted).
    History {
        /// The schedule id.
        id: String,
        /// The next_cursor of the previous page.
        #[arg(long)]
        cursor: Option<String>,
        /// Page size (1..=1000).
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Create or replace a schedule from a JSON upsert body (`POST /schedules/upsert`).
    Upsert {
        /// The JSON body, as `POST /schedules/upsert` takes it; `-` reads standard input.
        #[arg(value_name = "FILE", required_unless_present = "file_flag")]
        file: Option<String>,
        /// FILE given as a flag.
        #[arg(long = "file", value_name = "FILE", conflicts_with = "file")]
        file_flag: Option<String>,
        /// Store nothing: print what the change would do (created, updated or unchanged,
        /// fire times before and after, runs it would cancel).
        #[arg(long)]
        dry_run: bool,
    },
}

/// Runs one verb against the API.
///
/// # Errors
/// An unreachable API, or a refusal (the problem's detail).
pub fn run(args: &Args) -> anyhow::Result<()> {
    let global = &args.api;
    let request = request(&args.verb)?;
    let answer = block_on(call(&global.url, global.token.as_deref(), request))?;
    let Some(body) = answer else {
        if !global.json {
            let said = match &args.verb {
                Verb::Pause { id, .. } => format!("paused {id}"),
                Verb::Resume { id } => format!("resumed {id}"),
                Verb::Delete { id } => format!("deleted {id}"),
                Verb::Unskip { id, run_at } => {
                    format!("skip of {id} at {run_at} taken back: that tick runs again")
                }
                _ => "done".to_string(),
            };
            println!("{said}");
        }
        return Ok(());
    };
    if global.json {
        println!("{}", serde_json::to_string_pretty(&body)?);
        return Ok(());
    }
    match &args.verb {
        Verb::List { .. } => {
            print!("{}", crate::show::schedules_table(&body));
            print_cursor(&body);
        }
        Verb::Trigger { .. } => {
            print!("{}", crate::show::runs_table(&json!({ "runs": [body] })));
        }
        Verb::History { .. } => {
            print!("{}", crate::show::history_table(&body));
            print_cursor(&body);
        }
        Verb::Skips { .. } => print!("{}", crate::show::skips_table(&body)),
        Verb::Upsert { .. } => {
            if let (Some(outcome), Some(id)) =
                (body["outcome"].as_str(), body["schedule_id"].as_str())
            {
                println!("{outcome} schedule {id}");
            }
            println!("{}", crate::show::fields(&body));
        }
        _ => println!("{}", crate::show::fields(&body)),
    }
    Ok(())
}

/// The `next_cursor` line under a page, when there is a next page.
pub(crate) fn print_cursor(body: &Value) {
    if let Some(cursor) = body["next_cursor"].as_str() {
        println!("next_cursor: {cursor}");
    }
}

/// Runs one `kairos runs` verb against the API.
///
/// # Errors
/// An unreachable API, or a refusal (the problem's detail).
pub fn run_runs(args: &RunsArgs) -> anyhow::Result<()> {
    let global = &args.api;
    let request = runs_request(&args.verb);
    let answer = block_on(call(&global.url, global.token.as_deref(), request))?;
    let body = answer.context("the API answered no body")?;
    if global.json {
        println!("{}", serde_json::to_string_pretty(&body)?);
    } else if let RunsVerb::Get { key } = &args.verb {
        println!(
            "{}",
            crate::show::fields(&crate::show::outputs_elided(&body, key))
        );
    } else if let RunsVerb::Logs { key, attempt } = &args.verb {
        print!("{}", crate::show::logs_text(&body, key, *attempt)?);
    } else if body.get("runs").is_some() {
        print!("{}", crate::show::runs_table(&body));
        print_cursor(&body);
    } else {
        let one = json!({ "runs": [body] });
        print!("{}", crate::show::runs_table(&one));
        if let Some(message) = body["message"].as_str() {
            println!("{message}");
        }
    }
    Ok(())
}

fn runs_request(verb: &RunsVerb) -> Request {
    match verb {
        RunsVerb::List {
            schedule,
            workflow,
            status,
            phase,
            source,
            from,
            to,
            limit,
            cursor,
        } => {
            let mut query = vec![("limit", limit.to_string())];
            for (name, value) in [
                ("schedule_id", schedule),
                ("workflow_id", workflow),
                ("status", status),
                ("phase", phase),
                ("source", source),
                ("from", from),
                ("to", to),
                ("cursor", cursor),
            ] {
                query.extend(value.clone().map(|value| (name, value)));
            }
            (Method::GET, "/runs".to_string(), query, None)
        }
        RunsVerb::Get { key } | RunsVerb::Logs { key, .. } => (
            Method::GET,
            format!("/runs/{}", segment(key)),
            Vec::new(),
            None,
        ),
        RunsVerb::Retry { key, request_id } => {
            let body = match request_id {
                Some(id) => serde_json::json!({ "request_id": id }),
                None => serde_json::json!({}),
            };
            let path = format!("/runs/{}/retry", segment(key));
            (Method::POST, path, Vec::new(), Some(body))
        }
        RunsVerb::Cancel { key, reason } => {
            let body = match reason {
                Some(reason) => serde_json::json!({ "reason": reason }),
                None => serde_json::json!({}),
            };
            let path = format!("/runs/{}/cancel", segment(key));
            (Method::POST, path, Vec::new(), Some(body))
        }
        RunsVerb::DeadLetters {
            schedule,
            workflow,
            cursor,
            limit,
        } => {
            let mut query = vec![("limit", limit.to_string())];
            query.extend(schedule.clone().map(|id| ("schedule_id", id)));
            query.extend(workflow.clone().map(|id| ("workflow_id", id)));
            query.extend(cursor.clone().map(|cursor| ("cursor", cursor)));
            (Method::GET, "/dead-letters".to_string(), query, None)
        }
        RunsVerb::Late {
            schedule,
            workflow,
            cursor,
            limit,
        } => {
            let mut query = vec![("late", "true".to_string()), ("limit", limit.to_string())];
            query.extend(schedule.clone().map(|id| ("schedule_id", id)));
            query.extend(workflow.clone().map(|id| ("workflow_id", id)));
            query.extend(cursor.clone().map(|cursor| ("cursor", cursor)));
            (Method::GET, "/runs".to_string(), query, None)
        }
    }
}

pub(crate) fn block_on<T>(
    future: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("start the async runtime")?;
    runtime.block_on(future)
}

/// Sends one request; `None` for a 204.
pub(crate) async fn call(
    url: &str,
    token: Option<&str>,
    request: Request,
) -> anyhow::Result<Option<Value>> {
    let client = reqwest::Client::new();
    let base = url.trim_end_matches('/');
    let (method, path, query, body) = request;
    let mut request = client
        .request(method, format!("{base}{path}"))
        .query(&query);
    if let Some(body) = body {
        request = request.json(&body);
    }
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("call {base}"))?;
    answer(response).await
}

pub(crate) type Request = (Method, String, Vec<(&'static str, String)>, Option<Value>);

fn request(verb: &Verb) -> anyhow::Result<Request> {
    let pause = |id: &str, paused: bool| json!({ "schedule_id": id, "paused": paused });
    Ok(match verb {
        Verb::List {
            search,
            workflow_id,
            user_id,
            paused,
            cursor,
            limit,
        } => {
            let mut query = vec![("limit", limit.to_string())];
            let optional = [
                ("q", search.clone()),
                ("workflow_id", workflow_id.clone()),
                ("user_id", user_id.clone()),
                ("paused", paused.map(|p| p.to_string())),
                ("cursor", cursor.clone()),
            ];
            query.extend(optional.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))));
            (Method::GET, "/schedules".into(), query, None)
        }
        Verb::Get { id } => (
            Method::GET,
            format!("/schedules/{}", segment(id)),
            vec![],
            None,
        ),
        Verb::Pause { id, note, until } => {
            let mut body = pause(id, true);
            if let Some(note) = note {
                body["note"] = json!(note);
            }
            if let Some(until) = until {
                body["until"] = json!(until);
            }
            (Method::POST, "/schedules/pause".into(), vec![], Some(body))
        }
        Verb::Skip { id, run_at, note } => {
            let mut body = json!({ "run_at": run_at });
            if let Some(note) = note {
                body["note"] = json!(note);
            }
            let path = format!("/schedules/{}/skips", segment(id));
            (Method::POST, path, vec![], Some(body))
        }
        Verb::Skips { id } => (
            Method::GET,
            format!("/schedules/{}/skips", segment(id)),
            vec![],
            None,
        ),
        Verb::Unskip { id, run_at } => (
            Method::DELETE,
            format!("/schedules/{}/skips/{}", segment(id), time_segment(run_at)),
            vec![],
            None,
        ),
        Verb::Resume { id } => (
            Method::POST,
            "/schedules/pause".into(),
            vec![],
            Some(pause(id, false)),
        ),
        Verb::Delete { id } => (
            Method::DELETE,
            format!("/schedules/{}", segment(id)),
            vec![],
            None,
        ),
        Verb::Trigger {
            id,
            request_id,
            overlap_policy,
        } => {
            let request_id = request_id.clone().unwrap_or_else(new_request_id);
            let mut body = json!({ "request_id": request_id });
            if let Some(policy) = overlap_policy {
                body["overlap_policy"] = json!(policy);
            }
            let path = format!("/schedules/{}/trigger", segment(id));
            (Method::POST, path, vec![], Some(body))
        }
        Verb::Backfill {
            id,
            from,
            to,
            overlap_policy,
        } => {
            let mut body = json!({ "from": from, "to": to });
            if let Some(policy) = overlap_policy {
                body["overlap_policy"] = json!(policy);
            }
            let path = format!("/schedules/{}/backfill", segment(id));
            (Method::POST, path, vec![], Some(body))
        }
        Verb::History { id, cursor, limit } => {
            let mut query = vec![("limit", limit.to_string())];
            query.extend(cursor.clone().map(|cursor| ("cursor", cursor)));
            let path = format!("/schedules/{}/history", segment(id));
            (Method::GET, path, query, None)
        }
        Verb::Upsert {
            file,
            file_flag,
            dry_run,
        } => {
            let query = if *dry_run {
                vec![("dry_run", "true".to_string())]
            } else {
                Vec::new()
            };
            let file = file
                .as_ref()
                .or(file_flag.as_ref())
                .expect("clap requires one");
            let body = read_json(file)?;
            (Method::POST, "/schedules/upsert".into(), query, Some(body))
        }
    })
}

/// A request id unique to this call: the time in nanoseconds and the process id.
fn new_request_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("cli-{nanos}-{}", std::process::id())
}

/// The JSON in `file` (`-`: standard input).
pub(crate) fn read_json(file: &str) -> anyhow::Result<Value> {
    let text = if file == "-" {
        std::io::read_to_string(std::io::stdin()).context("read standard input")?
    } else {
        std::fs::read_to_string(file).with_context(|| format!("read {file}"))?
    };
    serde_json::from_str(&text).with_context(|| format!("{file} is not JSON"))
}

/// Percent-encodes a path segment (ids are plain ASCII when valid; anything else is
/// escaped so the server names the bad id instead of routing elsewhere).
pub(crate) fn segment(id: &str) -> String {
    id.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// Percent-encodes a time for a path segment: digits, `-`, `T`, `Z` and `.` stay, so
/// `2026-03-09T07:00:00Z` reads as itself in the server's log; `:` and `+` are escaped.
fn time_segment(at: &str) -> String {
    at.bytes()
        .map(|b| match b {
            b'0'..=b'9' | b'-' | b'T' | b'Z' | b'.' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

async fn answer(response: Response) -> anyhow::Result<Option<Value>> {
    let status = response.status();
    let text = response.text().await.context("read the answer")?;
    if status == StatusCode::NO_CONTENT {
        return Ok(None);
    }
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if status.is_success() {
        return Ok(Some(body));
    }
    let detail = match &body {
        Value::String(text) if !text.is_empty() => text.as_str(),
        _ => body["detail"].as_str().unwrap_or("no detail"),
    };
    let mut message = format!("{status}: {detail}");
    for error in body["errors"].as_array().into_iter().flatten() {
        let text = |key: &str| match &error[key] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        message.push_str(&format!("\n  {}: {}", text("field"), text("rule")));
    }
    if status == StatusCode::UNAUTHORIZED {
        message.push_str("\n  give a token with --token or the environment variable KAIROS_TOKEN");
    }
    bail!(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, clap::Parser)]
    struct Line {
        #[command(subcommand)]
        verb: Verb,
    }

    fn query_of(args: &[&str]) -> Vec<(&'static str, String)> {
        let line = Line::try_parse_from(args).expect("parses");
        request(&line.verb).expect("request").2
    }

    #[test]
    fn list_search_is_sent_as_q() {
        for flag in ["--search", "--q"] {
            let query = query_of(&["kairos", "list", flag, "Dem%"]);
            assert!(
                query.contains(&("q", "Dem%".to_string())),
                "{flag}: {query:?}"
            );
        }
        let query = query_of(&["kairos", "list"]);
        assert!(query.iter().all(|(name, _)| *name != "q"), "{query:?}");
    }
}
