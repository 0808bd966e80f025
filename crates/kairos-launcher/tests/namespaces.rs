//! Two deployments on one `nats-server`: each names its streams from its own
//! `nats.stream_prefix` and never touches the other's; a deployment that would take over a
//! stream of another (same stream name, other subjects) is refused with an error naming the
//! stream, and the stream is left as it was. Config is the only source of truth for limits.

use std::time::Duration;

use futures::StreamExt;
use kairos_launcher::status::{read_stream, Lane, StatusConsumer};
use kairos_launcher::{
    CancelMessage, DeadLetter, Error, NatsConfig, NatsLauncher, Retention, RunLauncher,
};
use kairos_testkit::NatsServer;
use support::message;

use crate::support;

fn deployment(url: String, stream_prefix: &str, subject_prefix: &str) -> NatsConfig {
    let mut config = NatsConfig::new(url);
    config.name_streams(stream_prefix);
    config.subject_prefix = subject_prefix.to_string();
    config
}

/// Publishes one launch, one dead letter and one cancel request through `launcher`.
async fn publish_all(launcher: &NatsLauncher, key: &str) {
    let sent = launcher.launch(&[message(key, 1)]).await;
    assert!(sent[0].is_ok(), "launch: {:?}", sent[0]);
    let letter = DeadLetter {
        launch: message(key, 1),
        attempts: 1,
        last_error: Some("boom".into()),
    };
    let sent = launcher.dead_letter(&[letter]).await;
    assert!(sent[0].is_ok(), "dead letter: {:?}", sent[0]);
    let cancel = CancelMessage {
        idempotency_key: key.to_string(),
        run_id: None,
        attempt: 1,
        reason: None,
        workflow_id: "etl".into(),
        schedule_id: "nightly".into(),
        requested_at: "2026-03-09T07:00:05Z".into(),
    };
    let sent = launcher.cancel(&[cancel]).await;
    assert!(sent[0].is_ok(), "cancel: {:?}", sent[0]);
}

/// The subjects of every message in `stream`.
async fn subjects_in(launcher: &NatsLauncher, stream: &str) -> Vec<String> {
    read_stream(launcher, stream)
        .await
        .expect("read stream")
        .into_iter()
        .map(|stored| stored.subject)
        .collect()
}

/// The subjects stream `stream` is bound to on the server.
async fn bound_subjects(launcher: &NatsLauncher, stream: &str) -> Vec<String> {
    let mut handle = launcher
        .jetstream()
        .get_stream(stream)
        .await
        .expect("stream");
    handle.info().await.expect("info").config.subjects.clone()
}

#[tokio::test]
async fn two_deployments_share_one_server_without_touching_each_other() {
    let server = NatsServer::start();
    let first = NatsLauncher::connect(deployment(server.url(), "TEAM_A", "team_a"))
        .await
        .expect("first deployment");
    StatusConsumer::connect(&first, Lane::All)
        .await
        .expect("first status");
    let second = NatsLauncher::connect(deployment(server.url(), "TEAM_B", "team_b"))
        .await
        .expect("second deployment");
    StatusConsumer::connect(&second, Lane::All)
        .await
        .expect("second status");
    publish_all(&first, "ka").await;
    publish_all(&second, "kb").await;

    for (launcher, team, subject) in [(&first, "TEAM_A", "team_a"), (&second, "TEAM_B", "team_b")] {
        assert_eq!(
            subjects_in(launcher, &format!("{team}_LAUNCH")).await,
            [format!("{subject}.launch.etl")]
        );
        assert_eq!(
            subjects_in(launcher, &format!("{team}_DLQ")).await,
            [format!("{subject}.dlq.etl")]
        );
        assert_eq!(
            subjects_in(launcher, &format!("{team}_CANCEL")).await,
            [format!("{subject}.cancel.etl")]
        );
        for kind in ["launch", "status", "dlq", "cancel"] {
            let stream = format!("{team}_{}", kind.to_uppercase());
            assert_eq!(
                bound_subjects(launcher, &stream).await,
                [format!("{subject}.{kind}.>")],
                "{stream} keeps its own subjects"
            );
        }
    }
}

#[tokio::test]
async fn a_stream_of_another_deployment_is_refused_and_left_alone() {
    let server = NatsServer::start();
    let first = NatsLauncher::connect(deployment(server.url(), "KAIROS", "team_a"))
        .await
        .expect("first deployment");
    StatusConsumer::connect(&first, Lane::All)
        .await
        .expect("first status");

    // Same stream names, other subjects: the launch stream is the first one it meets.
    let refused = NatsLauncher::connect(deployment(server.url(), "KAIROS", "team_b")).await;
    match refused {
        Err(
            ref err @ Error::StreamTaken {
                ref stream,
                ref found,
                ref wanted,
            },
        ) => {
            assert_eq!(stream, "KAIROS_LAUNCH");
            assert_eq!(found, &["team_a.launch.>"]);
            assert_eq!(wanted, &["team_b.launch.>"]);
            assert!(err.is_misconfiguration() && !err.is_retryable());
            let text = err.to_string();
            assert!(text.contains("KAIROS_LAUNCH") && text.contains("nats.stream_prefix"));
        }
        other => panic!("expected StreamTaken, got {other:?}"),
    }

    // Its own launch, dead-letter and cancel streams, but the first one's status stream.
    let mut config = deployment(server.url(), "TEAM_B", "team_b");
    config.status_stream = "KAIROS_STATUS".into();
    let second = NatsLauncher::connect(config).await.expect("own streams");
    let refused = StatusConsumer::connect(&second, Lane::All).await;
    assert!(
        matches!(&refused, Err(Error::StreamTaken { stream, .. }) if stream == "KAIROS_STATUS"),
        "{refused:?}"
    );

    for (kind, stream) in [
        ("launch", "KAIROS_LAUNCH"),
        ("status", "KAIROS_STATUS"),
        ("dlq", "KAIROS_DLQ"),
        ("cancel", "KAIROS_CANCEL"),
    ] {
        assert_eq!(
            bound_subjects(&first, stream).await,
            [format!("team_a.{kind}.>")],
            "{stream} is unchanged"
        );
    }
    publish_all(&first, "ka").await;
    assert_eq!(
        subjects_in(&first, "KAIROS_LAUNCH").await,
        ["team_a.launch.etl"]
    );
}

#[tokio::test]
async fn limits_come_from_config_at_every_start() {
    let server = NatsServer::start();
    let mut config = deployment(server.url(), "KAIROS", "kairos");
    config.launch_retention = Retention {
        max_age: Duration::from_secs(3 * 24 * 3600),
        max_bytes: 64 << 20,
    };
    let launcher = NatsLauncher::connect(config.clone())
        .await
        .expect("connect");
    let limits =
        |info: &async_nats::jetstream::stream::Info| (info.config.max_age, info.config.max_bytes);
    let mut stream = launcher
        .jetstream()
        .get_stream("KAIROS_LAUNCH")
        .await
        .expect("stream");
    let info = stream.info().await.expect("info").clone();
    assert_eq!(
        limits(&info),
        (Duration::from_secs(3 * 24 * 3600), 64 << 20)
    );
    let mut dlq = launcher
        .jetstream()
        .get_stream("KAIROS_DLQ")
        .await
        .expect("dlq");
    let dlq_info = dlq.info().await.expect("info").clone();
    assert_eq!(
        limits(&dlq_info),
        (
            Retention::DEAD_LETTERS.max_age,
            Retention::DEAD_LETTERS.max_bytes
        )
    );

    // An operator changes a limit by hand; the next start puts config's back.
    let mut by_hand = info.config.clone();
    by_hand.max_age = Duration::from_secs(3600);
    launcher
        .jetstream()
        .update_stream(by_hand)
        .await
        .expect("update by hand");
    NatsLauncher::connect(config).await.expect("restart");
    let info = stream.info().await.expect("info").clone();
    assert_eq!(
        limits(&info),
        (Duration::from_secs(3 * 24 * 3600), 64 << 20)
    );
}

#[tokio::test]
async fn instances_starting_together_with_one_config_update_no_stream() {
    let server = NatsServer::start();
    let config = deployment(server.url(), "KAIROS", "kairos");
    let first = NatsLauncher::connect(config.clone())
        .await
        .expect("connect");
    let mut updates = first
        .jetstream()
        .client()
        .subscribe("$JS.EVENT.ADVISORY.STREAM.UPDATED.>")
        .await
        .expect("subscribe to stream updates");
    first.jetstream().client().flush().await.expect("flush");

    let starts = (0..3).map(|_| NatsLauncher::connect(config.clone()));
    for started in futures::future::join_all(starts).await {
        started.expect("start with the same config");
    }
    let update = tokio::time::timeout(Duration::from_millis(500), updates.next()).await;
    assert!(
        update.is_err(),
        "a start with an unchanged config updated stream {:?}",
        update.ok().flatten().map(|message| message.subject)
    );

    // A start with another limit does update the stream it changes.
    let mut changed = config;
    changed.launch_retention.max_age = Duration::from_secs(3600);
    NatsLauncher::connect(changed).await.expect("start changed");
    let update = tokio::time::timeout(Duration::from_secs(5), updates.next())
        .await
        .expect("an update advisory for the changed stream")
        .expect("subscription open");
    assert_eq!(
        update.subject.as_str(),
        "$JS.EVENT.ADVISORY.STREAM.UPDATED.KAIROS_LAUNCH"
    );
}
