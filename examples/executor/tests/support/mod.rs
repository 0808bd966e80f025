//! What both executor tests start from: a real nats-server, a stream catching
//! `kairos.status.>` (standing in for kairos's status intake), and launch messages
//! published by kairos's own launcher.

use async_nats::jetstream::{self, stream};
use kairos_launcher::{LaunchMessage, NatsConfig, NatsLauncher, RunLauncher, Source};
use kairos_testkit::NatsServer;
use serde_json::Value;

/// The server, a JetStream context on it, and the status stream to read reports from.
pub struct Harness {
    pub server: NatsServer,
    // Each test crate compiles this module on its own; the Python test does not read it.
    #[allow(dead_code)]
    pub js: jetstream::Context,
    pub statuses: stream::Stream,
}

/// Starts the server and publishes one launch per `(idempotency_key, dag)`.
pub async fn harness(launches: &[(&str, Value)]) -> Harness {
    let server = NatsServer::start();
    let launcher = NatsLauncher::connect(NatsConfig::new(server.url()))
        .await
        .expect("connect");
    let js = jetstream::new(async_nats::connect(server.url()).await.expect("client"));
    let statuses = js
        .create_stream(stream::Config {
            name: "STATUS_UNDER_TEST".into(),
            subjects: vec!["kairos.status.>".into()],
            ..Default::default()
        })
        .await
        .expect("status stream");
    let messages: Vec<LaunchMessage> = launches
        .iter()
        .map(|(key, dag)| launch(key, dag.clone()))
        .collect();
    let outcomes = launcher.launch(&messages).await;
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    Harness {
        server,
        js,
        statuses,
    }
}

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
        region: None,
        dag: dag.into(),
    }
}
