//! The status subject named in each launch message puts a run's reports in the partition
//! where a NATS server mapping `{{partition(N,1)}}` puts reports sent on
//! `<prefix>.status.<key>`: checked against a real nats-server's mapping, so an executor may
//! use either subject and a run's reports still meet in one partition.

use std::collections::HashMap;

use kairos_launcher::status::{read_stream, status_subject};
use kairos_launcher::{NatsConfig, NatsLauncher, RunLauncher};
use kairos_testkit::NatsServer;

use crate::support;

const PARTITIONS: u16 = 16;

#[tokio::test]
async fn the_launch_names_the_partition_the_servers_mapping_gives_its_key() {
    let server = NatsServer::start_mapping_status(PARTITIONS);
    let mut config = NatsConfig::new(server.url());
    config.status_partitions = PARTITIONS;
    let launcher = NatsLauncher::connect(config).await.expect("connect");
    let jetstream = launcher.jetstream();
    jetstream
        .create_stream(async_nats::jetstream::stream::Config {
            name: "STATUS_SEEN".into(),
            subjects: vec!["kairos.status.>".into()],
            ..Default::default()
        })
        .await
        .expect("a stream keeping every report");

    let keys: Vec<String> = (0..200).map(|n| format!("{n:064x}")).collect();
    let messages: Vec<_> = keys.iter().map(|key| support::message(key, 1)).collect();
    for sent in launcher.launch(&messages).await {
        sent.expect("launched");
    }
    for key in &keys {
        jetstream
            .publish(format!("kairos.status.{key}"), "{}".into())
            .await
            .expect("publish")
            .await
            .expect("stored");
    }

    let mapped: Vec<String> = read_stream(&launcher, "STATUS_SEEN")
        .await
        .expect("read reports")
        .into_iter()
        .map(|stored| stored.subject)
        .collect();
    let named: HashMap<String, String> = read_stream(&launcher, "KAIROS_LAUNCH")
        .await
        .expect("read launches")
        .into_iter()
        .map(|stored| {
            let body: serde_json::Value =
                serde_json::from_slice(&stored.payload).expect("launch JSON");
            let key = body["idempotency_key"].as_str().expect("key").to_string();
            let subject = body["status_subject"].as_str().expect("status_subject");
            (key, subject.to_string())
        })
        .collect();
    assert_eq!(mapped.len(), keys.len());
    let mut partitions_used = std::collections::HashSet::new();
    for (key, mapped) in keys.iter().zip(&mapped) {
        assert_eq!(&named[key], mapped, "key {key}");
        assert_eq!(mapped, &status_subject("kairos", key, PARTITIONS));
        partitions_used.insert(mapped.split('.').nth(2).expect("partition").to_string());
    }
    assert_eq!(
        partitions_used.len(),
        usize::from(PARTITIONS),
        "{partitions_used:?}"
    );
}

#[tokio::test]
async fn without_partitions_the_launch_names_the_keys_own_subject() {
    let server = NatsServer::start();
    let mut config = NatsConfig::new(server.url());
    config.status_partitions = 0;
    let launcher = NatsLauncher::connect(config).await.expect("connect");
    let key = format!("{:064x}", 7);
    for sent in launcher.launch(&[support::message(&key, 1)]).await {
        sent.expect("launched");
    }
    let stored = read_stream(&launcher, "KAIROS_LAUNCH")
        .await
        .expect("read launches");
    let body: serde_json::Value = serde_json::from_slice(&stored[0].payload).expect("JSON");
    assert_eq!(body["status_subject"], format!("kairos.status.{key}"));
}
