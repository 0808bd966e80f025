//! The command-line conventions of `kairos`, run as a user runs it against a real `kairos
//! serve` (api role, real PostgreSQL and nats-server): `--url`, `--token` and `--json`
//! anywhere on the line, `--url` without a scheme, a table by default and `--json` for every
//! listing, `workflows deploy` (dry-run too) and `workflows get`, shell completions, and a
//! description for every command and flag in the help.

use crate::support;

use std::process::{Command, Output};

use serde_json::Value;
use support::Served;

/// `kairos ARGS` with no KAIROS_URL or KAIROS_TOKEN in the environment: the line says all.
fn kairos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kairos"))
        .args(args)
        .env_remove("KAIROS_URL")
        .env_remove("KAIROS_TOKEN")
        .output()
        .expect("run kairos")
}

/// Standard output of a run that must succeed.
fn ok(args: &[&str]) -> String {
    let output = kairos(args);
    assert!(
        output.status.success(),
        "kairos {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8")
}

/// Standard error of a run that must fail.
fn refused(args: &[&str]) -> String {
    let output = kairos(args);
    assert!(!output.status.success(), "kairos {args:?} succeeded");
    String::from_utf8(output.stderr).expect("utf-8")
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|err| panic!("not JSON ({err}):\n{text}"))
}

/// The value of `key` in a one-field-per-line answer.
fn field(text: &str, key: &str) -> String {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(key))
        .map(|l| l[key.len()..].trim().to_string())
        .unwrap_or_else(|| panic!("no {key} in:\n{text}"))
}

/// The header and rows of a table, each row split on runs of two or more spaces.
fn table(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(|line| {
            line.split("  ")
                .map(str::trim)
                .filter(|cell| !cell.is_empty())
                .map(String::from)
                .collect()
        })
        .collect()
}

#[test]
fn global_flags_tables_json_and_workflows_against_a_real_serve() {
    let served = Served::start("api", "conventions");
    // No scheme: http:// is added.
    let url = format!("localhost:{}", served.port);
    let url = url.as_str();
    let dir = std::env::temp_dir().join(format!("kairos-conventions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("wf.json");
    std::fs::write(
        &file,
        r#"{"workflow_id": "wf", "version": 1, "dag": {"nodes": [{"id": "a"}]},
            "schedules": [{"schedule_id": "s1", "user_id": "u", "cron_expr": "0 3 * * *",
                           "timezone": "UTC"}]}"#,
    )
    .expect("write the deploy file");
    let file = file.to_str().expect("utf-8 path");

    // workflows deploy --dry-run, flags after the verb: what it would do, nothing stored.
    let dry = ok(&["workflows", "deploy", file, "--dry-run", "--url", url]);
    assert_eq!(field(&dry, "dry_run"), "true", "{dry}");
    assert_eq!(field(&dry, "workflow_created"), "true", "{dry}");
    assert_eq!(field(&dry, "schedules[0].schedule_id"), "s1", "{dry}");
    assert_eq!(field(&dry, "schedules[0].change"), "created", "{dry}");
    let dry = json(&ok(&[
        "workflows",
        "deploy",
        file,
        "--dry-run",
        "--url",
        url,
        "--json",
    ]));
    assert_eq!(dry["schedules"][0]["change"], "created", "{dry}");
    let missing = refused(&["workflows", "get", "wf", "1", "--url", url]);
    assert!(
        missing.contains("404"),
        "a dry-run stores nothing: {missing}"
    );

    // workflows deploy for real, then get (text and --json).
    let deployed = ok(&["workflows", "deploy", file, "--url", url]);
    assert_eq!(field(&deployed, "created"), "true", "{deployed}");
    assert_eq!(
        field(&deployed, "schedules[0].schedule_id"),
        "s1",
        "{deployed}"
    );
    assert_eq!(field(&deployed, "schedules[0].revision"), "1", "{deployed}");
    let again = json(&ok(&["workflows", "--json", "deploy", file, "--url", url]));
    assert_eq!(again["created"], false, "the same DAG again: {again}");
    let got = ok(&["workflows", "get", "wf", "1", "--url", url]);
    assert_eq!(field(&got, "workflow_id"), "wf", "{got}");
    assert_eq!(field(&got, "dag.nodes[0].id"), "a", "{got}");
    let got = json(&ok(&[
        "workflows",
        "--json",
        "get",
        "wf",
        "1",
        "--url",
        url,
    ]));
    assert_eq!(got["dag"], serde_json::json!({"nodes": [{"id": "a"}]}));
    // The id and version from the flags when the file has none; a mismatch is refused.
    let bare = dir.join("bare.json");
    std::fs::write(&bare, r#"{"dag": {"nodes": [{"id": "b"}]}}"#).expect("write");
    let bare = bare.to_str().expect("utf-8 path");
    let flags = [
        "workflows",
        "deploy",
        bare,
        "--workflow",
        "wf2",
        "--version",
        "3",
    ];
    let made = json(&ok(&[&flags[..], &["--url", url, "--json"]].concat()));
    assert_eq!(
        (made["workflow_id"].clone(), made["version"].clone()),
        ("wf2".into(), 3.into())
    );
    let said = refused(&[
        "workflows",
        "deploy",
        file,
        "--workflow",
        "other",
        "--url",
        url,
    ]);
    assert!(
        said.contains("--workflow \"other\" does not match"),
        "{said}"
    );
    let said = refused(&["workflows", "deploy", bare, "--url", url]);
    assert!(said.contains("--workflow ID"), "{said}");

    // schedules list: a table by default, --json anywhere after the command.
    let listed = ok(&["schedules", "list", "--url", url]);
    let rows = table(&listed);
    assert_eq!(rows[0][0], "SCHEDULE_ID", "{listed}");
    assert_eq!(rows.len(), 2, "{listed}");
    assert_eq!(rows[1][..4], ["s1", "wf", "1", "0 3 * * *"], "{listed}");
    for args in [
        &["schedules", "--json", "list", "--url", url][..],
        &["schedules", "list", "--url", url, "--json"],
    ] {
        let page = json(&ok(args));
        assert_eq!(page["schedules"][0]["schedule_id"], "s1", "{args:?}");
    }
    // --token is accepted after the verb too (auth is off on this loopback serve).
    ok(&["schedules", "list", "--url", url, "--token", "t0k3n"]);

    // schedules get: fields by default, --json.
    let get = ok(&["schedules", "get", "s1", "--url", url]);
    assert_eq!(field(&get, "cron_expr"), "0 3 * * *");
    assert_eq!(
        json(&ok(&["schedules", "get", "s1", "--url", url, "--json"]))["version"],
        1
    );

    // schedules trigger: the run as a table row, or its JSON.
    let run = ok(&[
        "schedules",
        "trigger",
        "s1",
        "--request-id",
        "r1",
        "--url",
        url,
    ]);
    let rows = table(&run);
    assert_eq!(rows[0][0], "RUN_AT", "{run}");
    assert_eq!(rows[1][1..4], ["s1", "PENDING", "manual"], "{run}");
    let run = json(&ok(&[
        "schedules",
        "trigger",
        "s1",
        "--request-id",
        "r1",
        "--url",
        url,
        "--json",
    ]));
    assert_eq!(run["source"], "manual");

    // schedules backfill: fields, --json.
    let range = [
        "--from",
        "2026-01-01T03:00:00Z",
        "--to",
        "2026-01-03T03:00:00Z",
    ];
    let backfill = ok(&[
        &["schedules", "backfill", "s1"][..],
        &range,
        &["--url", url],
    ]
    .concat());
    assert_eq!(field(&backfill, "ticks"), "3", "{backfill}");
    let backfill = json(&ok(&[
        &["schedules", "backfill", "s1"][..],
        &range,
        &["--url", url, "--json"],
    ]
    .concat()));
    assert_eq!(backfill["already_present"], 3, "{backfill}");

    // runs list and dead-letters: tables, --json.
    let runs = ok(&["runs", "list", "--schedule", "s1", "--url", url]);
    let rows = table(&runs);
    assert_eq!(rows[0][0], "RUN_AT", "{runs}");
    assert_eq!(
        rows.len(),
        5,
        "three backfilled ticks and one manual run: {runs}"
    );
    let runs = json(&ok(&[
        "runs",
        "list",
        "--schedule",
        "s1",
        "--json",
        "--url",
        url,
    ]));
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(4));
    assert_eq!(ok(&["runs", "dead-letters", "--url", url]), "no runs\n");
    let dead = json(&ok(&["runs", "dead-letters", "--url", url, "--json"]));
    assert_eq!(dead["runs"], serde_json::json!([]));

    // calendars: put and get as fields, list as a table, all with --json too.
    let put = ok(&[
        "calendars",
        "put",
        "holidays",
        "--date",
        "2026-12-25",
        "--url",
        url,
    ]);
    assert_eq!(field(&put, "dates"), "2026-12-25", "{put}");
    let listed = ok(&["calendars", "list", "--url", url]);
    let rows = table(&listed);
    assert_eq!(
        rows[0],
        ["NAME", "DATES", "REVISION", "DESCRIPTION"],
        "{listed}"
    );
    assert_eq!(rows[1][..3], ["holidays", "1", "1"], "{listed}");
    let listed = json(&ok(&["calendars", "list", "--url", url, "--json"]));
    assert_eq!(listed["calendars"][0]["name"], "holidays");
    let got = json(&ok(&[
        "calendars",
        "get",
        "holidays",
        "--json",
        "--url",
        url,
    ]));
    assert_eq!(got["dates"], serde_json::json!(["2026-12-25"]));
    assert_eq!(
        ok(&["calendars", "delete", "holidays", "--url", url]),
        "deleted calendar holidays\n"
    );

    // pause, resume and delete say what they did; with --json they print nothing.
    assert_eq!(
        ok(&["schedules", "pause", "s1", "--url", url]),
        "paused s1\n"
    );
    assert_eq!(
        ok(&["schedules", "resume", "s1", "--url", url, "--json"]),
        ""
    );
}

#[test]
fn a_bad_url_is_refused_naming_the_flag_and_why() {
    for (url, why) in [
        ("ftp://example.com", "the scheme must be http or https"),
        ("http://host?debug=1", "must not have a query"),
        ("", "is empty"),
    ] {
        let said = refused(&["schedules", "list", "--url", url]);
        assert!(
            said.contains("'--url <URL>'") && said.contains(why),
            "{url}: {said}"
        );
    }
    // The environment variable goes through the same check.
    let output = Command::new(env!("CARGO_BIN_EXE_kairos"))
        .args(["runs", "dead-letters"])
        .env("KAIROS_URL", "gopher://x")
        .output()
        .expect("run kairos");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && said.contains("http or https"),
        "{said}"
    );
}

#[test]
fn json_before_the_verb_applies_to_preview() {
    let args = [
        "preview",
        "0 7 * * *",
        "--after",
        "2026-01-01T00:00:00Z",
        "-n",
        "2",
    ];
    let plain = ok(&args);
    assert_eq!(plain, "2026-01-01T07:00:00Z\n2026-01-02T07:00:00Z\n");
    let body = json(&ok(&[&args[..], &["--json"]].concat()));
    assert_eq!(
        body["fire_times"],
        serde_json::json!(["2026-01-01T07:00:00Z", "2026-01-02T07:00:00Z"])
    );
}

#[test]
fn completions_for_each_shell_name_the_commands() {
    for shell in ["bash", "zsh", "fish"] {
        let script = ok(&["completions", shell]);
        assert!(script.len() > 1000, "{shell}: {script}");
        for word in [
            "schedules",
            "workflows",
            "runs",
            "calendars",
            "preview",
            "dead-letters",
        ] {
            assert!(script.contains(word), "{shell} completions lack {word}");
        }
        assert!(script.contains("url"), "{shell} completions lack --url");
    }
    let said = refused(&["completions", "tcsh"]);
    assert!(said.contains("tcsh") && said.contains("bash"), "{said}");
}

#[test]
fn every_command_argument_and_flag_has_a_description() {
    let mut pending: Vec<Vec<String>> = vec![Vec::new()];
    let mut seen = 0;
    while let Some(path) = pending.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("-h");
        let help = ok(&args);
        let top = help.lines().next().unwrap_or_default();
        assert!(
            !top.trim().is_empty(),
            "{path:?} has no description:\n{help}"
        );
        assert!(
            !help.contains("no business logic") && !help.contains("wires config"),
            "{path:?}: {help}"
        );
        let lines: Vec<&str> = help.lines().collect();
        let mut section = "";
        for (i, line) in lines.iter().enumerate() {
            if !line.starts_with(' ') {
                section = line;
                continue;
            }
            let indent = line.len() - line.trim_start().len();
            if !matches!(section, "Commands:" | "Arguments:" | "Options:") || indent > 6 {
                continue;
            }
            let entry = line.trim_start();
            // Short lines: `name  description`; long ones: the description on the next,
            // further indented line.
            let (name, description) = match entry.split_once("  ") {
                Some((name, description)) => (name, description.to_string()),
                None => {
                    let next = lines.get(i + 1).copied().unwrap_or_default();
                    let deeper = next.len() - next.trim_start().len() > indent;
                    (
                        entry,
                        if deeper {
                            next.to_string()
                        } else {
                            String::new()
                        },
                    )
                }
            };
            assert!(
                !description.trim().is_empty(),
                "kairos {} -h: {name} has no description:\n{help}",
                path.join(" ")
            );
            if section == "Commands:" && name != "help" {
                let mut sub = path.clone();
                sub.push(name.to_string());
                pending.push(sub);
            }
        }
        seen += 1;
    }
    assert!(seen > 25, "only {seen} commands were checked");
    // The long help (--help) is there too.
    assert!(ok(&["workflows", "deploy", "--help"]).contains("--dry-run"));
}
