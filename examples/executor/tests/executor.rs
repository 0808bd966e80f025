//! The example executor against a real nats-server: launch messages published by kairos's
//! own launcher are run in dependency order and reported STARTED then SUCCESS/FAILED on the
//! NATS status subject, and acknowledged.

use std::time::{Duration, Instant};

use async_nats::jetstream::{self, stream};
use kairos_executor_example::{run, Reporter, Settings};
use kairos_launcher::{LaunchMessage, NatsConfig, NatsLauncher, RunLauncher, Source};
use kairos_testkit::NatsServer;
use serde_json::{json, Value};

fn launch(key: &str, dag: Value) -> LaunchMessage {
    LaunchMessage {
        idempotency_key: key.to_string(),
        schedule_id: "nightly".into(),
        workflow_id: "etl".into(),
        version: 1,
        user_id: "u1".into(),
        scheduled_for: "2026-03-09T07:00:00Z".into(),
        fire_at: "2026-03-09T07:00:00Z".into(),
        source: Source::Schedule,
        attempt: 1,
        dag,
    }
}

#[tokio::test]
async fn runs_launches_and_reports_status_on_nats() {
    let server = NatsServer::start();
    let launcher = NatsLauncher::connect(NatsConfig::new(server.url()))
        .await
        .expect("connect");
    let client = async_nats::connect(server.url()).await.expect("client");
    let js = jetstream::new(client);
    let mut statuses = js
        .create_stream(stream::Config {
            name: "STATUS_UNDER_TEST".into(),
            subjects: vec!["kairos.status.>".into()],
            ..Default::default()
        })
        .await
        .expect("status stream");

    let good = json!({"nodes": [{"id": "load", "depends_on": ["extract"]}, {"id": "extract"}]});
    let bad = json!({"nodes": [{"id": "extract"}, {"id": "load", "depends_on": ["extract"], "fail": true}]});
    let outcomes = launcher
        .launch(&[launch("good-run", good), launch("bad-run", bad)])
        .await;
    assert!(outcomes.iter().all(Result::is_ok));

    let settings = Settings {
        nats_url: server.url(),
        stream: "KAIROS_LAUNCH".into(),
        durable: "executor-under-test".into(),
        executor_id: "exec-1".into(),
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
        let key = message
            .subject
            .as_str()
            .trim_start_matches("kairos.status.")
            .to_string();
        assert_eq!(body["idempotency_key"], key.as_str());
        assert_eq!(body["executor_id"], "exec-1");
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
