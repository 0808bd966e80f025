//! One conformance suite for every `RunLauncher`: run against `InMemoryLauncher` and against
//! `NatsLauncher` on a real `nats-server` spawned per test.

use std::time::Duration;

use kairos_launcher::{Error, InMemoryLauncher, NatsConfig, NatsLauncher, RunLauncher};
use kairos_testkit::NatsServer;
use support::message;

use crate::support;

/// The contract, written once. `stored` reports how many messages the queue holds.
async fn conformance<L: RunLauncher>(launcher: &L, stored: impl AsyncFn() -> u64) {
    // A batch is stored in order with increasing sequences.
    let batch: Vec<_> = ["k1", "k2", "k3"].iter().map(|k| message(k, 1)).collect();
    let outcomes = launcher.launch(&batch).await;
    let sequences: Vec<u64> = outcomes
        .iter()
        .map(|o| {
            let enqueued = o.as_ref().expect("stored");
            assert!(!enqueued.duplicate);
            enqueued.stream_sequence
        })
        .collect();
    assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{sequences:?}");
    assert_eq!(stored().await, 3);

    // The same id again, alone or twice in one batch: acknowledged as duplicate, not stored.
    let again = launcher
        .launch(&[message("k2", 1), message("k4", 1), message("k4", 1)])
        .await;
    let again: Vec<_> = again
        .into_iter()
        .map(|o| o.expect("a duplicate is a success"))
        .collect();
    assert!(again[0].duplicate);
    assert_eq!(again[0].stream_sequence, sequences[1]);
    assert!(!again[1].duplicate && again[2].duplicate);
    assert_eq!(stored().await, 4);

    // An intentional re-launch (attempt 2) is a new message.
    let relaunch = launcher.launch(&[message("k1", 2)]).await;
    assert!(!relaunch[0].as_ref().expect("stored").duplicate);
    assert_eq!(stored().await, 5);

    // An oversized message fails permanently without failing its neighbours.
    let mut huge = message("k5", 1);
    huge.dag = std::sync::Arc::new(serde_json::json!({"blob": "x".repeat(2 * 1024 * 1024)}));
    let mixed = launcher.launch(&[huge, message("k6", 1)]).await;
    assert!(matches!(&mixed[0], Err(err @ Error::TooLarge { .. }) if !err.is_retryable()));
    assert!(mixed[1].is_ok());
    assert_eq!(stored().await, 6);
}

#[tokio::test]
async fn in_memory_launcher_conforms() {
    let launcher = InMemoryLauncher::new(1024 * 1024);
    conformance(&launcher, async || launcher.messages().len() as u64).await;
}

#[tokio::test]
async fn nats_launcher_conforms() {
    let server = NatsServer::start();
    let launcher = NatsLauncher::connect(NatsConfig::new(server.url()))
        .await
        .expect("connect");
    conformance(&launcher, async || {
        launcher.stream_messages().await.expect("stream info")
    })
    .await;
}

#[tokio::test]
async fn nats_launcher_sets_msg_id_and_subject() {
    let server = NatsServer::start();
    let launcher = NatsLauncher::connect(NatsConfig::new(server.url()))
        .await
        .expect("connect");
    launcher.launch(&[message("k1", 1), message("k1", 3)]).await;
    let mut stream = launcher
        .jetstream()
        .get_stream("KAIROS_LAUNCH")
        .await
        .expect("stream");
    let first = stream.get_raw_message(1).await.expect("message 1");
    assert_eq!(first.subject.as_str(), "kairos.launch.etl");
    let headers = first.headers;
    assert_eq!(headers.get("Nats-Msg-Id").map(|v| v.as_str()), Some("k1"));
    let second = stream.get_raw_message(2).await.expect("message 2");
    assert_eq!(
        second.headers.get("Nats-Msg-Id").map(|v| v.as_str()),
        Some("k1:3")
    );
    let body: serde_json::Value = serde_json::from_slice(&second.payload).expect("json body");
    assert_eq!(body["attempt"], 3);
    assert_eq!(body["source"], "schedule");
    assert_eq!(
        stream.info().await.expect("info").config.duplicate_window,
        Duration::from_secs(900)
    );
}

#[tokio::test]
async fn nats_outage_fails_retryably_then_the_retry_stores_once() {
    let mut server = NatsServer::start();
    let mut config = NatsConfig::new(server.url());
    config.ack_timeout = Duration::from_millis(500);
    let launcher = NatsLauncher::connect(config).await.expect("connect");
    assert!(launcher.launch(&[message("before", 1)]).await[0].is_ok());

    server.stop();
    let during = launcher.launch(&[message("during", 1)]).await;
    let err = during[0].as_ref().expect_err("nats is down");
    assert!(err.is_retryable(), "{err:?}");

    server.restart();
    // The client reconnects on its own; retry with the same id until acknowledged.
    let mut outcome = None;
    for _ in 0..50 {
        if let Ok(enqueued) = &launcher.launch(&[message("during", 1)]).await[0] {
            outcome = Some(*enqueued);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    outcome.expect("published after restart");
    // The file store kept the message from before the outage; "during" is there once, even
    // if the publish buffered during the outage was flushed on reconnect.
    assert_eq!(launcher.stream_messages().await.expect("info"), 2);
}

#[tokio::test]
async fn nats_launcher_completes_batches_larger_than_max_inflight() {
    let server = NatsServer::start();
    let mut config = NatsConfig::new(server.url());
    config.max_inflight = 16;
    let launcher = NatsLauncher::connect(config).await.expect("connect");
    let batch: Vec<_> = (0..100).map(|i| message(&format!("big-{i}"), 1)).collect();
    let outcomes = tokio::time::timeout(Duration::from_secs(20), launcher.launch(&batch))
        .await
        .expect("a batch past max_inflight must not stall");
    assert_eq!(outcomes.iter().filter(|o| o.is_ok()).count(), 100);
    assert_eq!(launcher.stream_messages().await.expect("info"), 100);
}

#[tokio::test]
async fn concurrent_batches_sharing_the_inflight_limit_never_wait_on_each_other() {
    // Two dispatch lanes share one launcher. Each batch is bigger than half the in-flight
    // limit: had each lane staged its messages before awaiting any acknowledgement, each
    // would hold half the permits and wait for the other's, until the caller's timeout.
    let server = NatsServer::start();
    let mut config = NatsConfig::new(server.url());
    config.max_inflight = 16;
    let launcher = NatsLauncher::connect(config).await.expect("connect");
    let lane = |name: &str| -> Vec<_> {
        (0..40)
            .map(|i| message(&format!("{name}-{i}"), 1))
            .collect()
    };
    let (a, b) = (lane("a"), lane("b"));
    let both = async { tokio::join!(launcher.launch(&a), launcher.launch(&b)) };
    let (a, b) = tokio::time::timeout(Duration::from_secs(20), both)
        .await
        .expect("two lanes past half the in-flight limit must not stall");
    assert_eq!(a.iter().chain(&b).filter(|o| o.is_ok()).count(), 80);
    assert_eq!(launcher.stream_messages().await.expect("info"), 80);
}
