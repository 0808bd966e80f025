//! Every message kairos publishes is a CloudEvent in the binary content mode of the NATS
//! protocol binding (`ce-*` headers, the JSON body unchanged) and carries the run's W3C
//! trace context, read back from a real `nats-server`.

use std::collections::BTreeMap;

use kairos_launcher::events::{CANCEL, DEAD_LETTER, LAUNCH};
use kairos_launcher::{CancelMessage, DeadLetter, NatsConfig, NatsLauncher, RunLauncher};
use kairos_testkit::NatsServer;
use support::message;

use crate::support;

const KEY: &str = "3f0a9c4e1b7d2a6f8e5c0b9a7d6e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e";

/// The headers (first value of each) and body of the message at `sequence` in `stream`.
async fn stored(
    launcher: &NatsLauncher,
    stream: &str,
    sequence: u64,
) -> (BTreeMap<String, String>, serde_json::Value) {
    let stream = launcher
        .jetstream()
        .get_stream(stream)
        .await
        .expect("stream");
    let message = stream.get_raw_message(sequence).await.expect("message");
    let headers = message
        .headers
        .iter()
        .map(|(name, values)| (name.to_string(), values[0].as_str().to_string()))
        .collect();
    let body = serde_json::from_slice(&message.payload).expect("JSON body");
    (headers, body)
}

fn assert_event(
    headers: &BTreeMap<String, String>,
    kind: &str,
    msg_id: &str,
    time: &str,
) -> String {
    let expected = [
        ("Nats-Msg-Id", msg_id),
        ("ce-specversion", "1.0"),
        ("ce-id", msg_id),
        ("ce-source", "/kairos/kairos/schedules/nightly"),
        ("ce-type", kind),
        ("ce-time", time),
        ("ce-subject", KEY),
        ("ce-datacontenttype", "application/json"),
    ];
    for (name, value) in expected {
        assert_eq!(
            headers.get(name).map(String::as_str),
            Some(value),
            "{name} of {kind}"
        );
    }
    let traceparent = headers.get("traceparent").expect("traceparent").clone();
    assert_eq!(
        kairos_core::trace::trace_id_of(&traceparent),
        Some(&KEY[..32]),
        "one trace per run, named by its key: {traceparent}"
    );
    traceparent
}

#[tokio::test]
async fn launch_dead_letter_and_cancel_messages_are_cloud_events_of_the_runs_trace() {
    let server = NatsServer::start();
    let launcher = NatsLauncher::connect(NatsConfig::new(server.url()))
        .await
        .expect("connect");
    let sent = launcher.launch(&[message(KEY, 1), message(KEY, 2)]).await;
    assert!(sent.iter().all(Result::is_ok), "{sent:?}");
    let again = launcher
        .redeliver(&[(message(KEY, 2), format!("{KEY}:2:r1"))])
        .await;
    assert!(again[0].is_ok(), "{again:?}");
    let letter = DeadLetter {
        launch: message(KEY, 2),
        attempts: 2,
        last_error: Some("boom".into()),
    };
    assert!(launcher.dead_letter(&[letter]).await[0].is_ok());
    let cancel = CancelMessage {
        idempotency_key: KEY.into(),
        run_id: Some("r-9".into()),
        attempt: 2,
        reason: None,
        workflow_id: "etl".into(),
        schedule_id: "nightly".into(),
        requested_at: "2026-03-09T07:00:05Z".into(),
    };
    assert!(launcher.cancel(&[cancel]).await[0].is_ok());

    let tick = "2026-03-09T07:00:00Z";
    let (first, body) = stored(&launcher, "KAIROS_LAUNCH", 1).await;
    let first_span = assert_event(&first, LAUNCH, KEY, tick);
    assert_eq!(
        body["idempotency_key"], KEY,
        "the body is the launch message"
    );
    assert_eq!(body["attempt"], 1);
    let (second, _) = stored(&launcher, "KAIROS_LAUNCH", 2).await;
    let second_span = assert_event(&second, LAUNCH, &format!("{KEY}:2"), tick);
    assert_ne!(first_span, second_span, "a span per message");
    let (resent, _) = stored(&launcher, "KAIROS_LAUNCH", 3).await;
    assert_event(&resent, LAUNCH, &format!("{KEY}:2:r1"), tick);
    let (dead, body) = stored(&launcher, "KAIROS_DLQ", 1).await;
    assert_event(&dead, DEAD_LETTER, &format!("{KEY}:dlq:2"), tick);
    assert_eq!(body["last_error"], "boom");
    let (cancelled, body) = stored(&launcher, "KAIROS_CANCEL", 1).await;
    assert_event(
        &cancelled,
        CANCEL,
        &format!("{KEY}:cancel:2"),
        "2026-03-09T07:00:05Z",
    );
    assert_eq!(body["run_id"], "r-9");
    assert!(body.get("schedule_id").is_none(), "the body is unchanged");

    // The same message id again is still one message (the header does not change dedup).
    let repeat = launcher.launch(&[message(KEY, 1)]).await;
    assert!(repeat[0].as_ref().is_ok_and(|enqueued| enqueued.duplicate));
}
