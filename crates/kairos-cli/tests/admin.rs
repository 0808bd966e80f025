//! `kairos schedules get`, `kairos workflows list|versions`, `kairos runs
//! list|get|logs|dead-letters|late|retry` against a real `kairos serve` (api and retention
//! roles, real PostgreSQL and nats-server): they show what the API answers,
//! stats included, and a refusal exits non-zero naming the field.

use crate::support;

use support::{http, kairos, stdout, Served};

#[test]
fn schedules_get_and_runs_list_show_what_the_api_answers() {
    let mut served = Served::start("api,retention", "admin");
    let port = served.port;

    let upsert = r#"{"schedule_id": "s1", "workflow_id": "wf", "version": 1, "user_id": "u",
        "cron_expr": "0 3 * * *", "timezone": "UTC"}"#;
    let dag = r#"{"dag": {"nodes": [{"id": "a"}]}}"#;
    let answer = http(port, "PUT", "/workflows/wf/versions/1", dag).expect("deploy");
    assert!(answer.contains(" 201 "), "{answer}");
    let answer = http(port, "POST", "/schedules/upsert", upsert).expect("upsert");
    assert!(answer.contains(" 201 "), "{answer}");
    let answer = http(
        port,
        "POST",
        "/schedules/s1/trigger",
        r#"{"request_id": "r1"}"#,
    )
    .expect("trigger");
    assert!(answer.contains(" 201 "), "{answer}");

    let get = stdout(&kairos(port, &["schedules", "get", "s1"]));
    let line = |key: &str| {
        get.lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .map(|l| l[key.len()..].trim().to_string())
            .unwrap_or_else(|| panic!("no {key} in:\n{get}"))
    };
    assert_eq!(line("schedule_id"), "s1");
    assert_eq!(line("cron_expr"), "0 3 * * *");
    assert_eq!(line("stats.runs_examined"), "1");
    assert_eq!(line("stats.missed_ticks"), "0");
    assert_eq!(line("stats.last_fire_at"), "-");
    assert_eq!(line("stats.why"), "-");
    assert_eq!(line("preview").split(", ").count(), 5);
    let json = stdout(&kairos(port, &["schedules", "get", "s1", "--json"]));
    let json: serde_json::Value = serde_json::from_str(&json).expect("--json prints JSON");
    assert_eq!(json["stats"]["runs_examined"], 1);

    let workflows = stdout(&kairos(port, &["workflows", "list"]));
    let lines: Vec<&str> = workflows.lines().collect();
    assert!(lines[0].starts_with("WORKFLOW_ID"), "{workflows}");
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        (cells[0], cells[1], cells[2], cells[4]),
        ("wf", "1", "1", "1"),
        "{workflows}"
    );
    let versions = stdout(&kairos(port, &["workflows", "versions", "wf"]));
    let row = versions.lines().nth(1).unwrap_or_default();
    assert_eq!(row.split_whitespace().next(), Some("1"), "{versions}");
    let unknown = kairos(port, &["workflows", "versions", "nope"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("nope"));

    let runs = stdout(&kairos(port, &["runs", "list", "--schedule", "s1"]));
    let lines: Vec<&str> = runs.lines().collect();
    assert_eq!(lines.len(), 2, "{runs}");
    assert!(lines[0].starts_with("RUN_AT"), "{runs}");
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        (cells[1], cells[2], cells[3], cells[4]),
        ("s1", "PENDING", "manual", "1")
    );
    let key = cells[6];
    let everywhere = stdout(&kairos(port, &["runs", "list", "--source", "manual"]));
    assert!(
        everywhere.contains(key),
        "no --schedule needed: {everywhere}"
    );
    let nope = kairos(port, &["runs", "list", "--schedule", "nope"]);
    assert!(!nope.status.success(), "an unknown schedule is an error");
    assert!(String::from_utf8_lossy(&nope.stderr).contains("nope"));
    let one = stdout(&kairos(port, &["runs", "get", key]));
    let field = |name: &str| {
        one.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .map(|l| l[name.len()..].trim().to_string())
    };
    assert_eq!(field("idempotency_key").as_deref(), Some(key), "{one}");
    assert_eq!(field("status").as_deref(), Some("PENDING"), "{one}");
    let none = stdout(&kairos(port, &["runs", "logs", key]));
    assert!(none.starts_with("No executor reported logs"), "{none}");

    let dead = stdout(&kairos(port, &["runs", "dead-letters", "--schedule", "s1"]));
    assert_eq!(dead, "no runs\n");
    let late = stdout(&kairos(port, &["runs", "late", "--schedule", "s1"]));
    assert_eq!(late, "no runs\n", "GET /runs?late=true answered");
    let late = kairos(port, &["runs", "late", "--limit", "0"]);
    assert!(!late.status.success());
    assert!(
        String::from_utf8_lossy(&late.stderr).contains("limit"),
        "{}",
        String::from_utf8_lossy(&late.stderr)
    );
    let retry = kairos(port, &["runs", "retry", key, "--request-id", "r1"]);
    assert!(!retry.status.success(), "a PENDING run cannot be retried");
    assert!(
        String::from_utf8_lossy(&retry.stderr).contains("FAILED or TIMED_OUT"),
        "{}",
        String::from_utf8_lossy(&retry.stderr)
    );
    let none = stdout(&kairos(
        port,
        &["runs", "list", "--schedule", "s1", "--status", "SUCCESS"],
    ));
    assert_eq!(none, "no runs\n");
    let bad = kairos(
        port,
        &["runs", "list", "--schedule", "s1", "--status", "DONE"],
    );
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("status"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    // Calendars: put (dates here and a description), get, list, delete.
    let put = stdout(&kairos(
        port,
        &[
            "calendars",
            "--json",
            "put",
            "holidays",
            "--date",
            "2026-12-25",
            "--date",
            "2026-12-26",
            "--description",
            "Christmas",
        ],
    ));
    let put: serde_json::Value = serde_json::from_str(&put).expect("put prints JSON");
    assert_eq!(
        put["dates"],
        serde_json::json!(["2026-12-25", "2026-12-26"])
    );
    let listed = stdout(&kairos(port, &["calendars", "list"]));
    let row: Vec<&str> = listed
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert!(listed.starts_with("NAME"), "{listed}");
    assert_eq!(row, ["holidays", "2", "1", "Christmas"], "{listed}");
    assert!(stdout(&kairos(port, &["calendars", "get", "holidays"])).contains("2026-12-26"));
    assert_eq!(
        stdout(&kairos(port, &["calendars", "delete", "holidays"])),
        "deleted calendar holidays\n"
    );
    let gone = kairos(port, &["calendars", "get", "holidays"]);
    assert!(!gone.status.success(), "a deleted calendar is gone");
    assert!(
        served.child.try_wait().expect("wait").is_none(),
        "serve (with the retention role) is still running"
    );
    // Published, the run takes an executor's report with a link and output.
    served.psql(&format!(
        "update schedule_runs set status = 'ENQUEUED', published_at = now() \
         where idempotency_key = '{key}'"
    ));
    let started = r#"{"status": "STARTED", "executor_id": "e1",
        "log_url": "https://logs.example.com/e1/7", "output": "node a (no action)\n"}"#;
    let answer = http(port, "POST", &format!("/runs/{key}/status"), started).expect("status");
    assert!(answer.contains(" 200 "), "{answer}");
    let logs = stdout(&kairos(port, &["runs", "logs", key]));
    let lines: Vec<&str> = logs.lines().collect();
    assert!(lines[0].starts_with("== attempt 1 (reported "), "{logs}");
    assert_eq!(
        lines[1..],
        ["logs: https://logs.example.com/e1/7", "node a (no action)"]
    );
    let one = stdout(&kairos(port, &["runs", "get", key]));
    assert!(
        one.contains("logs[0].output") && one.contains("1 line (kairos runs logs"),
        "{one}"
    );
    let missing = kairos(port, &["runs", "logs", key, "--attempt", "2"]);
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("attempt 2 of run"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
}

#[test]
fn schedules_upsert_trigger_backfill_and_pause_note_go_through_the_api() {
    let served = Served::start("api", "control");
    let port = served.port;
    let dir = tempfile_dir();
    let file = dir.join("s2.json");
    std::fs::write(
        &file,
        r#"{"schedule_id": "s2", "workflow_id": "wf", "version": 1, "user_id": "u",
            "cron_expr": "0 * * * *", "timezone": "UTC"}"#,
    )
    .expect("write body");
    let file = file.to_str().expect("utf-8 path");

    // A schedule of a workflow version that was never deployed is refused, naming it.
    let refused = kairos(port, &["schedules", "upsert", "--file", file]);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("400") && said.contains("workflow_id"),
        "{said}"
    );
    assert!(said.contains("PUT /workflows/wf/versions/1"), "{said}");
    let dag = r#"{"dag": {"nodes": [{"id": "a"}]}}"#;
    let answer = http(port, "PUT", "/workflows/wf/versions/1", dag).expect("deploy");
    assert!(answer.contains(" 201 "), "{answer}");

    // A dry-run says what would happen and stores nothing.
    let dry = stdout(&kairos(
        port,
        &["schedules", "upsert", "--file", file, "--dry-run", "--json"],
    ));
    let dry: serde_json::Value = serde_json::from_str(&dry).expect("JSON");
    assert_eq!(dry["schedules"][0]["change"], "created", "{dry}");
    assert!(
        !kairos(port, &["schedules", "get", "s2"]).status.success(),
        "nothing stored"
    );
    let stored = stdout(&kairos(port, &["schedules", "upsert", file]));
    assert_eq!(
        stored.lines().next(),
        Some("created schedule s2"),
        "{stored}"
    );
    assert!(
        stored
            .lines()
            .any(|l| l.split_whitespace().eq(["revision", "1"])),
        "{stored}"
    );
    let again = stdout(&kairos(port, &["schedules", "upsert", file]));
    assert_eq!(
        again.lines().next(),
        Some("unchanged schedule s2"),
        "{again}"
    );

    // Trigger: one run per request id, the override applied; a bad policy is refused.
    let args = [
        "schedules",
        "trigger",
        "s2",
        "--request-id",
        "r1",
        "--overlap-policy",
        "allow",
        "--json",
    ];
    let first: serde_json::Value =
        serde_json::from_str(&stdout(&kairos(port, &args))).expect("JSON");
    assert_eq!(first["source"], "manual");
    let again: serde_json::Value =
        serde_json::from_str(&stdout(&kairos(port, &args))).expect("JSON");
    assert_eq!(again["idempotency_key"], first["idempotency_key"]);
    let bad = kairos(
        port,
        &["schedules", "trigger", "s2", "--overlap-policy", "never"],
    );
    assert!(!bad.status.success());
    let said = String::from_utf8_lossy(&bad.stderr);
    assert!(
        said.contains("\n  overlap_policy: "),
        "each field error once, plain: {said}"
    );
    assert!(!said.contains("\"overlap_policy\""), "not as JSON: {said}");

    // Backfill three past hourly ticks.
    let backfill = stdout(&kairos(
        port,
        &[
            "schedules",
            "backfill",
            "s2",
            "--from",
            "2026-01-01T00:00:00Z",
            "--to",
            "2026-01-01T02:00:00Z",
            "--json",
        ],
    ));
    let backfill: serde_json::Value = serde_json::from_str(&backfill).expect("JSON");
    assert_eq!(
        (backfill["ticks"].clone(), backfill["created"].clone()),
        (3.into(), 3.into())
    );

    // Pause with a note; get shows it; resume clears it.
    stdout(&kairos(
        port,
        &["schedules", "pause", "s2", "--note", "vendor outage"],
    ));
    let get = stdout(&kairos(port, &["schedules", "get", "s2", "--json"]));
    let get: serde_json::Value = serde_json::from_str(&get).expect("JSON");
    assert_eq!(get["pause_note"], "vendor outage");
    stdout(&kairos(port, &["schedules", "resume", "s2"]));
    let get = stdout(&kairos(port, &["schedules", "get", "s2", "--json"]));
    let get: serde_json::Value = serde_json::from_str(&get).expect("JSON");
    assert_eq!(get["pause_note"], serde_json::Value::Null);
}

/// A fresh directory under the system's temporary directory.
fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("kairos-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}
