//! `kairos schedules history ID` against a real `kairos serve` (api role, real PostgreSQL
//! and nats-server): the schedule's changes as a table newest first (actor, kind, fields
//! old -> new, note), `--json` as the API answers, paging with `--limit` and `--cursor`, and
//! a bad cursor refused naming it.

use crate::support;

use support::{http, kairos, stdout, Served};

#[test]
fn schedules_history_shows_who_changed_what_and_why() {
    let served = Served::start("api", "history");
    let port = served.port;
    let dag = r#"{"dag": {"nodes": [{"id": "a"}]}}"#;
    let answer = http(port, "PUT", "/workflows/wf/versions/1", dag).expect("deploy");
    assert!(answer.contains(" 201 "), "{answer}");
    let upsert = r#"{"schedule_id": "s1", "workflow_id": "wf", "version": 1, "user_id": "u",
        "cron_expr": "0 3 * * *", "timezone": "UTC"}"#;
    let answer = http(port, "POST", "/schedules/upsert", upsert).expect("upsert");
    assert!(answer.contains(" 201 "), "{answer}");
    stdout(&kairos(
        port,
        &["schedules", "pause", "s1", "--note", "disk full"],
    ));
    stdout(&kairos(port, &["schedules", "resume", "s1"]));

    // A table, newest first: resume, pause (with its note), create; auth is off, so the
    // actor is anonymous.
    let table = stdout(&kairos(port, &["schedules", "history", "s1"]));
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("AT") && lines[0].contains("CHANGES"),
        "{table}"
    );
    assert_eq!(lines.len(), 4, "{table}");
    assert!(
        lines[1].contains("resume") && lines[1].contains("anonymous"),
        "{table}"
    );
    assert!(lines[1].contains("paused: true -> false"), "{table}");
    assert!(
        lines[2].contains("pause") && lines[2].ends_with("disk full"),
        "{table}"
    );
    assert!(lines[2].contains("pause_note: - -> disk full"), "{table}");
    assert!(
        lines[3].contains("create") && lines[3].contains("cron_expr: - -> 0 3 * * *"),
        "{table}"
    );

    // --json: the API's answer.
    let json = stdout(&kairos(port, &["schedules", "history", "s1", "--json"]));
    let body: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let kinds: Vec<&str> = body["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|c| c["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(kinds, ["resume", "pause", "create"]);
    assert_eq!(body["history"][1]["note"], "disk full");
    assert!(body["history"][0]["request_id"].is_string(), "{body}");

    // Pages: two, then the rest from the printed cursor.
    let first = stdout(&kairos(
        port,
        &["schedules", "history", "s1", "--limit", "2"],
    ));
    let cursor = first
        .lines()
        .find_map(|l| l.strip_prefix("next_cursor: "))
        .unwrap_or_else(|| panic!("no next_cursor in:\n{first}"));
    let rest = stdout(&kairos(
        port,
        &[
            "schedules",
            "history",
            "s1",
            "--limit",
            "2",
            "--cursor",
            cursor,
        ],
    ));
    assert_eq!(rest.lines().count(), 2, "{rest}");
    assert!(
        rest.lines().nth(1).expect("row").contains("create"),
        "{rest}"
    );
    assert!(!rest.contains("next_cursor"), "{rest}");

    // A bad cursor: refused, naming it.
    let refused = kairos(port, &["schedules", "history", "s1", "--cursor", "x"]);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("400") && said.contains("cursor"), "{said}");
}
