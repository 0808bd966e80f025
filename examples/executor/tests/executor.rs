//! The example executor against a real nats-server: launch messages published by kairos's
//! own launcher are run in dependency order and reported STARTED then SUCCESS/FAILED (with
//! the launch's attempt) on the NATS status subject, and acknowledged.

use crate::support;

use std::time::{Duration, Instant};

use async_nats::jetstream;
use kairos_executor_example::{run, Deliver, Reporter, Settings};
use serde_json::{json, Value};
use support::{harness, Harness};

#[tokio::test]
async fn runs_launches_and_reports_status_on_nats() {
    let good = json!({"nodes": [{"id": "load", "depends_on": ["extract"]}, {"id": "extract"}]});
    let bad = json!({"nodes": [{"id": "extract"}, {"id": "load", "depends_on": ["extract"], "fail": true}]});
    let Harness {
        server,
        js,
        mut statuses,
    } = harness(&[("good-run", good), ("bad-run", bad)]).await;

    let settings = Settings {
        nats_url: server.url(),
        stream: "KAIROS_LAUNCH".into(),
        durable: "executor-under-test".into(),
        executor_id: "exec-1".into(),
        subject_prefix: "kairos".into(),
        heartbeat_every: Duration::from_millis(200),
        concurrency: 2,
        ack_wait: Duration::from_secs(30),
        // The launches were published before the executor's durable existed.
        deliver: Deliver::All,
    };
    let reporter = Reporter::Nats {
        jetstream: js.clone(),
        prefix: "kairos".into(),
    };
    let executor = tokio::spawn(async move { run(&settings, &reporter).await });

    let deadline = Instant::now() + Duration::from_secs(20);
    while statuses.info().await.expect("info").state.messages < 4 {
        assert!(Instant::now() < deadline, "executor reported too little");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    executor.abort();

    let mut by_key: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    for seq in 1..=4 {
        let message = statuses.get_raw_message(seq).await.expect("status message");
        let body: Value = serde_json::from_slice(&message.payload).expect("json");
        let key = body["idempotency_key"]
            .as_str()
            .expect("idempotency_key")
            .to_string();
        // The subject the launch named (`status_subject`): its run's status partition.
        let named = kairos_launcher::NatsConfig::new(server.url())
            .status_subjects()
            .of(&key);
        assert_eq!(message.subject.as_str(), named);
        assert_ne!(named, format!("kairos.status.{key}"));
        assert_eq!(body["executor_id"], "exec-1");
        assert_eq!(
            body["attempt"], 1,
            "every report echoes the launch's attempt"
        );
        by_key.entry(key).or_default().push(body);
    }
    let status = |key: &str| -> Vec<String> {
        by_key[key]
            .iter()
            .map(|b| b["status"].as_str().expect("status").to_string())
            .collect()
    };
    assert_eq!(status("good-run"), ["STARTED", "SUCCESS"]);
    assert_eq!(status("bad-run"), ["STARTED", "FAILED"]);
    assert_eq!(by_key["bad-run"][1]["error"], "node load failed");

    // Both launches were acknowledged: nothing is left for redelivery.
    let mut consumer: jetstream::consumer::PullConsumer = js
        .get_stream("KAIROS_LAUNCH")
        .await
        .expect("stream")
        .get_consumer("executor-under-test")
        .await
        .expect("consumer");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let info = consumer.info().await.expect("consumer info");
        if info.num_ack_pending == 0 && info.num_pending == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "unacknowledged launches: {info:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
