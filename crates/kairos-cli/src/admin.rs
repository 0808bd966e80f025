//! `kairos schedules list|get|pause|resume|delete`: admin verbs over the HTTP API, so they
//! obey the same auth and validation as every other caller. Prints the JSON answer; a
//! refusal prints the problem's detail (and each field error) and exits non-zero.

use anyhow::{bail, Context};
use reqwest::{Method, Response, StatusCode};
use serde_json::{json, Value};

/// Arguments of `kairos schedules`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Base URL of a kairos API.
    #[arg(long, env = "KAIROS_URL", default_value = "http://127.0.0.1:8080")]
    url: String,
    /// Bearer token (a reader suffices for list/get; pause, resume and delete need a deployer).
    #[arg(long, env = "KAIROS_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Debug, clap::Subcommand)]
enum Verb {
    /// List schedules (one page; pass the printed next_cursor as --cursor for the next).
    List {
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
    /// Show one schedule with its next five fire times.
    Get {
        /// The schedule id.
        id: String,
    },
    /// Pause a schedule (its unpublished runs are cancelled).
    Pause {
        /// The schedule id.
        id: String,
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
}

/// Runs one verb against the API.
///
/// # Errors
/// An unreachable API, or a refusal (the problem's detail).
pub fn run(args: &Args) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("start the async runtime")?;
    runtime.block_on(call(args))
}

async fn call(args: &Args) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let base = args.url.trim_end_matches('/');
    let (method, path, query, body) = request(&args.verb);
    let mut request = client
        .request(method, format!("{base}{path}"))
        .query(&query);
    if let Some(body) = body {
        request = request.json(&body);
    }
    if let Some(token) = &args.token {
        request = request.bearer_auth(token);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("call {base}"))?;
    print_answer(response).await
}

type Request = (Method, String, Vec<(&'static str, String)>, Option<Value>);

fn request(verb: &Verb) -> Request {
    let pause = |id: &str, paused: bool| json!({ "schedule_id": id, "paused": paused });
    match verb {
        Verb::List {
            workflow_id,
            user_id,
            paused,
            cursor,
            limit,
        } => {
            let mut query = vec![("limit", limit.to_string())];
            let optional = [
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
        Verb::Pause { id } => (
            Method::POST,
            "/schedules/pause".into(),
            vec![],
            Some(pause(id, true)),
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
    }
}

/// Percent-encodes a path segment (ids are plain ASCII when valid; anything else is
/// escaped so the server names the bad id instead of routing elsewhere).
fn segment(id: &str) -> String {
    id.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

async fn print_answer(response: Response) -> anyhow::Result<()> {
    let status = response.status();
    let text = response.text().await.context("read the answer")?;
    if status == StatusCode::NO_CONTENT {
        println!("ok");
        return Ok(());
    }
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if status.is_success() {
        println!("{}", serde_json::to_string_pretty(&body)?);
        return Ok(());
    }
    let mut message = format!(
        "{status}: {}",
        body["detail"].as_str().unwrap_or("no detail")
    );
    for error in body["errors"].as_array().into_iter().flatten() {
        message.push_str(&format!("\n  {}: {}", error["field"], error["rule"]));
    }
    bail!(message)
}
