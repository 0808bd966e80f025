//! The Python executor (`examples/executor-python`, written from `schemas/` alone) against a
//! real nats-server: proof that the protocol is language-agnostic. Needs `python3` with
//! `nats-py` (`scripts/test` installs it); a missing interpreter or package fails the test.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{harness, Harness};

#[tokio::test]
async fn python_executor_runs_launches_and_reports_status() {
    let good = json!({"nodes": [{"id": "b", "depends_on": ["a"]}, {"id": "a"}]});
    let bad = json!({"nodes": [{"id": "a", "fail": true}]});
    let Harness {
        server,
        mut statuses,
        ..
    } = harness(&[("py-good", good), ("py-bad", bad)]).await;

    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../executor-python/executor.py"
    );
    let mut child = Command::new("python3")
        .args([
            script,
            "--nats-url",
            &server.url(),
            "--executor-id",
            "py-1",
            "--max-runs",
            "2",
        ])
        .spawn()
        .expect("python3 must be installed");
    let deadline = Instant::now() + Duration::from_secs(30);
    let exit = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("python executor did not finish two runs");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        exit.success(),
        "python executor failed (is nats-py installed? scripts/test installs it)"
    );

    let mut seen: Vec<(String, String)> = Vec::new();
    for seq in 1..=statuses.info().await.expect("info").state.messages {
        let message = statuses.get_raw_message(seq).await.expect("status");
        let body: Value = serde_json::from_slice(&message.payload).expect("json");
        assert_eq!(body["executor_id"], "py-1");
        assert_eq!(
            body["attempt"], 1,
            "every report echoes the launch's attempt"
        );
        let key = body["idempotency_key"].as_str().expect("key").to_string();
        seen.push((key, body["status"].as_str().expect("status").to_string()));
    }
    let of = |key: &str| -> Vec<&str> {
        seen.iter()
            .filter(|(k, _)| k == key)
            .map(|(_, s)| s.as_str())
            .collect()
    };
    assert_eq!(of("py-good"), ["STARTED", "SUCCESS"]);
    assert_eq!(of("py-bad"), ["STARTED", "FAILED"]);
}
