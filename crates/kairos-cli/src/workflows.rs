//! `kairos workflows deploy FILE [--dry-run]`, `kairos workflows get ID VERSION`,
//! `kairos workflows list [--q TEXT]` and `kairos workflows versions ID`: the workflow store
//! over the HTTP API (`/workflows`).
//!
//! The deploy file is the body `PUT /workflows/{id}/versions/{v}` takes, `{dag, schedules?}`,
//! and, as a kubectl manifest names what it applies to, it may name its workflow and version
//! in the same file: `{"workflow_id": "etl", "version": 3, "dag": {...}, "schedules": [...]}`.
//! `--workflow ID` and `--version N` give them when the file does not; when both give one,
//! they must agree (a mismatch is refused rather than guessed, as `kubectl -n` refuses a
//! manifest of another namespace).

use anyhow::{bail, Context};
use reqwest::Method;
use serde_json::Value;

use crate::admin::{block_on, call, read_json, segment, Request};
use crate::global::Global;

/// Arguments of `kairos workflows`.
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
    /// Store a workflow version's DAG and sync its schedules (deployer token); with
    /// --dry-run, show what it would change.
    Deploy {
        /// The deploy file (JSON): `{"workflow_id", "version", "dag", "schedules"}`, where
        /// the id and version may come from the flags instead; `-` reads standard input.
        file: String,
        /// The workflow id, when the file has no "workflow_id" (must match it otherwise).
        #[arg(long, value_name = "ID")]
        workflow: Option<String>,
        /// The workflow version, when the file has no "version" (must match it otherwise).
        #[arg(long, value_name = "N")]
        version: Option<i64>,
        /// Store nothing: print what the deploy would do (workflow created or not, each
        /// schedule created, updated, unchanged or removed, fire times before and after).
        #[arg(long)]
        dry_run: bool,
    },
    /// Show one stored workflow version: its DAG and when it was stored.
    Get {
        /// The workflow id.
        id: String,
        /// The version number.
        version: i64,
    },
    /// List stored workflows in id order: versions, the newest, schedules.
    List {
        /// Only workflows whose id contains this text, ignoring case.
        #[arg(long, value_name = "TEXT")]
        q: Option<String>,
        /// Workflows per page (1 to 1000).
        #[arg(long, default_value_t = 100)]
        limit: i64,
        /// The next_cursor of the previous page.
        #[arg(long)]
        cursor: Option<String>,
    },
    /// List a workflow's stored versions, newest first, with the schedules of each.
    Versions {
        /// The workflow id.
        id: String,
    },
}

/// Runs one verb against the API and prints its answer (fields per line, or `--json`).
///
/// # Errors
/// An unreadable or inconsistent deploy file, an unreachable API, or a refusal (the
/// problem's detail and each field error).
pub fn run(args: &Args) -> anyhow::Result<()> {
    let global = &args.api;
    let request = request(&args.verb)?;
    let answer = block_on(call(&global.url, global.token.as_deref(), request))?;
    let body = answer.context("the API answered no body")?;
    if global.json {
        println!("{}", serde_json::to_string_pretty(&body)?);
        return Ok(());
    }
    match &args.verb {
        Verb::List { .. } => {
            print!("{}", crate::show::workflows_table(&body));
            crate::admin::print_cursor(&body);
        }
        Verb::Versions { .. } => print!("{}", crate::show::versions_table(&body)),
        _ => println!("{}", crate::show::fields(&body)),
    }
    Ok(())
}

fn request(verb: &Verb) -> anyhow::Result<Request> {
    match verb {
        Verb::Deploy {
            file,
            workflow,
            version,
            dry_run,
        } => {
            let (workflow_id, version, body) =
                deploy_body(file, read_json(file)?, workflow.as_deref(), *version)?;
            let path = format!("/workflows/{}/versions/{version}", segment(&workflow_id));
            let query = if *dry_run {
                vec![("dry_run", "true".to_string())]
            } else {
                Vec::new()
            };
            Ok((Method::PUT, path, query, Some(body)))
        }
        Verb::Get { id, version } => Ok((
            Method::GET,
            format!("/workflows/{}/versions/{version}", segment(id)),
            Vec::new(),
            None,
        )),
        Verb::List { q, limit, cursor } => {
            let mut query = vec![("limit", limit.to_string())];
            query.extend(q.iter().map(|q| ("q", q.clone())));
            query.extend(cursor.iter().map(|cursor| ("cursor", cursor.clone())));
            Ok((Method::GET, "/workflows".to_string(), query, None))
        }
        Verb::Versions { id } => Ok((
            Method::GET,
            format!("/workflows/{}/versions", segment(id)),
            Vec::new(),
            None,
        )),
    }
}

/// The workflow id, the version and the API body (`{dag, schedules?}`) of a deploy file,
/// the id and version taken from the file or the flags.
fn deploy_body(
    file: &str,
    mut body: Value,
    workflow: Option<&str>,
    version: Option<i64>,
) -> anyhow::Result<(String, i64, Value)> {
    let Some(object) = body.as_object_mut() else {
        bail!("{file}: a deploy file is a JSON object {{\"workflow_id\", \"version\", \"dag\", \"schedules\"}}");
    };
    let in_file_id = match object.remove("workflow_id") {
        None => None,
        Some(Value::String(id)) => Some(id),
        Some(other) => bail!("{file}: \"workflow_id\" must be a string, not {other}"),
    };
    let in_file_version = match object.remove("version") {
        None => None,
        Some(value) => match value.as_i64() {
            Some(version) => Some(version),
            None => bail!("{file}: \"version\" must be a whole number, not {value}"),
        },
    };
    let workflow_id = match (workflow, in_file_id) {
        (Some(flag), Some(in_file)) if flag != in_file => bail!(
            "--workflow {flag:?} does not match \"workflow_id\": {in_file:?} in {file}: \
             drop one or make them equal"
        ),
        (Some(flag), _) => flag.to_string(),
        (None, Some(in_file)) => in_file,
        (None, None) => bail!("no workflow id: give --workflow ID or \"workflow_id\" in {file}"),
    };
    let version = match (version, in_file_version) {
        (Some(flag), Some(in_file)) if flag != in_file => bail!(
            "--version {flag} does not match \"version\": {in_file} in {file}: drop one or \
             make them equal"
        ),
        (Some(version), _) | (None, Some(version)) => version,
        (None, None) => bail!("no version: give --version N or \"version\" in {file}"),
    };
    Ok((workflow_id, version, body))
}

#[cfg(test)]
mod tests {
    use super::deploy_body;
    use serde_json::json;

    #[test]
    fn the_id_and_version_come_from_the_file_or_the_flags() {
        let file = json!({"workflow_id": "etl", "version": 3, "dag": {"nodes": []}});
        let (id, version, body) = deploy_body("f.json", file.clone(), None, None).unwrap();
        assert_eq!((id.as_str(), version), ("etl", 3));
        assert_eq!(body, json!({"dag": {"nodes": []}}));
        let bare = json!({"dag": {"nodes": []}});
        let (id, version, _) = deploy_body("f.json", bare.clone(), Some("etl"), Some(4)).unwrap();
        assert_eq!((id.as_str(), version), ("etl", 4));
        let same = deploy_body("f.json", file.clone(), Some("etl"), Some(3)).unwrap();
        assert_eq!(same.1, 3);
    }

    #[test]
    fn a_missing_or_contradicting_id_or_version_is_refused_naming_it() {
        let file = json!({"workflow_id": "etl", "version": 3, "dag": {}});
        let err = deploy_body("f.json", file.clone(), Some("other"), None).unwrap_err();
        assert!(
            err.to_string()
                .contains("--workflow \"other\" does not match"),
            "{err}"
        );
        let err = deploy_body("f.json", file, None, Some(4)).unwrap_err();
        assert!(
            err.to_string().contains("--version 4 does not match"),
            "{err}"
        );
        let err = deploy_body("f.json", json!({"dag": {}}), None, Some(1)).unwrap_err();
        assert!(err.to_string().contains("--workflow ID"), "{err}");
        let err = deploy_body("f.json", json!({"dag": {}}), Some("a"), None).unwrap_err();
        assert!(err.to_string().contains("--version N"), "{err}");
        let err = deploy_body("f.json", json!({"version": "x"}), Some("a"), None).unwrap_err();
        assert!(err.to_string().contains("whole number"), "{err}");
        let err = deploy_body("f.json", json!([1]), Some("a"), Some(1)).unwrap_err();
        assert!(err.to_string().contains("JSON object"), "{err}");
    }
}
