//! `kairos runs cancel KEY [--reason TEXT]` against a real `kairos serve` (api role, real
//! PostgreSQL and nats-server): it cancels through the API, prints the run and what the
//! cancel did, and an unknown key exits non-zero.

use crate::support;

use support::{http, kairos, Served};

#[test]
fn runs_cancel_cancels_through_the_api() {
    let served = Served::start("api", "cancel");
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
    let runs = kairos(port, &["runs", "list", "--schedule", "s1", "--json"]);
    let runs: serde_json::Value = serde_json::from_slice(&runs.stdout).expect("JSON");
    let key = runs["runs"][0]["idempotency_key"]
        .as_str()
        .expect("a key")
        .to_string();

    let done = kairos(
        port,
        &["runs", "cancel", &key, "--reason", "not today", "--json"],
    );
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let body: serde_json::Value = serde_json::from_slice(&done.stdout).expect("JSON");
    assert_eq!(body["status"], "CANCELLED");
    assert_eq!(body["cancel"], "cancelled");
    assert_eq!(body["reason"], "cancelled by an operator: not today");

    let again = kairos(port, &["runs", "cancel", &key]);
    assert!(again.status.success());
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(
        text.contains("CANCELLED") && text.contains("already finished"),
        "{text}"
    );

    let unknown = kairos(port, &["runs", "cancel", &"f".repeat(64)]);
    assert!(!unknown.status.success(), "an unknown key is an error");
}
