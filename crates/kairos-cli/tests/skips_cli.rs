//! `kairos schedules skip|skips|unskip` and `kairos schedules pause --until` against a real
//! `kairos serve` (api role, real PostgreSQL): they go through the API, show what it
//! answers, and a refusal exits non-zero naming the field.

use crate::support;

use std::process::Output;

use support::{http, kairos, stdout, Served};

fn json(output: &Output) -> serde_json::Value {
    serde_json::from_str(&stdout(output)).expect("JSON")
}

#[test]
fn skip_skips_unskip_and_pause_until_go_through_the_api() {
    let served = Served::start("api", "skips");
    let port = served.port;
    let dag = r#"{"dag": {"nodes": [{"id": "a"}]}}"#;
    let answer = http(port, "PUT", "/workflows/wf/versions/1", dag).expect("deploy");
    assert!(answer.contains(" 201 "), "{answer}");
    let upsert = r#"{"schedule_id": "s1", "workflow_id": "wf", "version": 1, "user_id": "u",
        "cron_expr": "0 3 * * *", "timezone": "UTC"}"#;
    let answer = http(port, "POST", "/schedules/upsert", upsert).expect("upsert");
    assert!(answer.contains(" 201 "), "{answer}");

    let tick = "2099-01-01T03:00:00Z";
    let skipped = json(&kairos(
        port,
        &[
            "schedules",
            "skip",
            "s1",
            tick,
            "--note",
            "freeze",
            "--json",
        ],
    ));
    assert_eq!(skipped["reason"], "skipped by anonymous: freeze");
    let table = stdout(&kairos(port, &["schedules", "skips", "s1"]));
    let row = table.lines().nth(1).expect("a row under the header");
    assert!(
        row.starts_with(tick) && row.contains("anonymous") && row.ends_with("freeze"),
        "{table}"
    );

    // Not a fire time: refused, naming run_at and the nearest fire times.
    let refused = kairos(port, &["schedules", "skip", "s1", "2099-01-01T04:00:00Z"]);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("run_at") && said.contains(tick), "{said}");

    let unskipped = stdout(&kairos(port, &["schedules", "unskip", "s1", tick]));
    assert!(
        unskipped.contains("s1") && unskipped.contains(tick),
        "names the schedule and the tick: {unskipped}"
    );
    let table = stdout(&kairos(port, &["schedules", "skips", "s1"]));
    assert_eq!(table.trim(), "no skips");

    stdout(&kairos(
        port,
        &[
            "schedules",
            "pause",
            "s1",
            "--note",
            "vendor",
            "--until",
            "2099-01-01T00:00:00Z",
        ],
    ));
    let get = json(&kairos(port, &["schedules", "get", "s1", "--json"]));
    assert_eq!(get["paused_until"], "2099-01-01T00:00:00Z");
    assert_eq!(get["paused_by"], "anonymous");
    let refused = kairos(
        port,
        &[
            "schedules",
            "pause",
            "s1",
            "--until",
            "2000-01-01T00:00:00Z",
        ],
    );
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("until"));
}
