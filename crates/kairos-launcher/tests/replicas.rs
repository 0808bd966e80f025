//! `nats.replicas` against real servers: a single server refuses three replicas with an
//! error naming the setting, and a 3-node cluster gets every stream (launch, dead-letter,
//! status) with three replicas, also when the streams already existed with one.

use std::time::{Duration, Instant};

use kairos_launcher::status::{Lane, StatusConsumer, STATUS_STREAM};
use kairos_launcher::{Error, NatsConfig, NatsLauncher};
use kairos_testkit::{NatsCluster, NatsServer};

fn config(url: String, replicas: usize) -> NatsConfig {
    let mut config = NatsConfig::new(url);
    config.replicas = replicas;
    config
}

async fn replicas_of(launcher: &NatsLauncher, stream: &str) -> usize {
    let mut stream = launcher
        .jetstream()
        .get_stream(stream)
        .await
        .expect("get stream");
    let info = stream.info().await.expect("stream info");
    info.config.num_replicas
}

/// Binds the status consumer, retrying for at most 20 s as the `status` role does: right
/// after the status stream is scaled up, its consumer is scaled up too and elects a leader,
/// and a consumer request can time out meanwhile.
async fn status_consumer(launcher: &NatsLauncher) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match StatusConsumer::connect(launcher, Lane::All).await {
            Ok(_) => return,
            Err(err) if err.is_retryable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(err) => panic!("status stream with three replicas: {err:?}"),
        }
    }
}

/// Connects to the cluster, retrying for at most 30 s: creating or scaling a replicated
/// stream can time out while a freshly formed, loaded cluster is still placing it (as
/// `kairos serve`'s NATS link retries too).
async fn connect_to_cluster(urls: String, replicas: usize) -> NatsLauncher {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match NatsLauncher::connect(config(urls.clone(), replicas)).await {
            Ok(launcher) => return launcher,
            Err(err) if err.is_retryable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(err) => panic!("connect with {replicas} replica(s): {err:?}"),
        }
    }
}

#[tokio::test]
async fn three_replicas_on_a_single_server_is_refused_naming_the_setting() {
    let server = NatsServer::start();
    let err = NatsLauncher::connect(config(server.url(), 3))
        .await
        .expect_err("a single server cannot hold three replicas");
    assert!(
        matches!(err, Error::Replicas { asked: 3, .. }),
        "expected Error::Replicas, got {err:?}"
    );
    assert!(!err.is_retryable());
    // The same server takes one replica, and the refusal created nothing before it.
    let launcher = NatsLauncher::connect(config(server.url(), 1))
        .await
        .expect("one replica on a single server");
    assert_eq!(replicas_of(&launcher, "KAIROS_LAUNCH").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_gets_three_replicas_of_every_stream_and_existing_streams_are_scaled_up() {
    let started = Instant::now();
    let cluster = tokio::task::spawn_blocking(|| NatsCluster::start(3))
        .await
        .expect("start cluster");
    let single = connect_to_cluster(cluster.urls(), 1).await;
    StatusConsumer::connect(&single, Lane::All)
        .await
        .expect("status stream with one replica");
    assert_eq!(replicas_of(&single, "KAIROS_LAUNCH").await, 1);

    let launcher = connect_to_cluster(cluster.urls(), 3).await;
    status_consumer(&launcher).await;
    for stream in ["KAIROS_LAUNCH", "KAIROS_DLQ", STATUS_STREAM] {
        assert_eq!(replicas_of(&launcher, stream).await, 3, "{stream}");
    }
    assert!(started.elapsed() < Duration::from_secs(60));
}
