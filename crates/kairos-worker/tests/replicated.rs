//! The dispatcher on a 3-node JetStream cluster with `nats.replicas = 3`: the launch
//! stream's leader is killed (SIGKILL) in the middle of a burst of 1,000 due runs, and every
//! run still reaches the stream exactly once. Publishes that fail during the election leave
//! their runs `PENDING`; the retry uses the same `Nats-Msg-Id`, which the new leader
//! de-duplicates because the followers tracked the ids too.

use crate::dispatcher_support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use dispatcher_support::{config, key, schedule, statuses, stream_ids, until, workflow};
use kairos_core::RunStatus;
use kairos_launcher::{NatsConfig, NatsLauncher};
use kairos_store::PgPool;
use kairos_testkit::{sqlx, NatsCluster, TestDb};
use kairos_worker::dispatcher::Dispatcher;

const RUNS: u64 = 1_000;
const STREAM: &str = "KAIROS_LAUNCH";

/// A launcher with three replicas on `url` (short ack timeout, so the election fails fast).
/// Creating a replicated stream can time out while a loaded cluster is still placing it, so
/// the connection is retried for up to 30 s, as `kairos serve`'s NATS link does.
async fn replicated_launcher(url: String) -> NatsLauncher {
    let mut config = NatsConfig::new(url);
    config.replicas = 3;
    config.ack_timeout = Duration::from_secs(1);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match NatsLauncher::connect(config.clone()).await {
            Ok(launcher) => return launcher,
            Err(err) if err.is_retryable() && Instant::now() < deadline => {
                eprintln!("replicated launcher not ready yet ({err}); retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(err) => panic!("connect with three replicas: {err:?}"),
        }
    }
}

/// `RUNS` overdue PENDING runs of schedule `s`, keys `key(0..RUNS)`, in key order of
/// `fire_at`.
async fn burst(pool: &PgPool) {
    sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, workflow_id, \
         version, user_id) \
         select lpad(to_hex(n), 64, '0'), 's', date_trunc('second', now() - interval '60 s'), \
         now() - interval '60 s' + n * interval '1 ms', 'wf', 1, 'u' \
         from generate_series(0, $1 - 1) as n",
    )
    .bind(RUNS as i64)
    .execute(pool)
    .await
    .expect("insert runs");
}

async fn count_enqueued(pool: &PgPool) -> usize {
    statuses(pool)
        .await
        .values()
        .filter(|status| **status == RunStatus::Enqueued)
        .count()
}

/// The stream's leader, polled until there is one other than `not` (bounded).
async fn leader(cluster: &NatsCluster, not: Option<usize>, limit: Duration) -> usize {
    let deadline = Instant::now() + limit;
    loop {
        let found = tokio::task::block_in_place(|| cluster.stream_leader(STREAM));
        match found {
            Some(index) if Some(index) != not => return index,
            _ => assert!(Instant::now() < deadline, "no new leader of {STREAM}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_launch_stream_leader_mid_burst_delivers_every_run_once() {
    tokio::time::timeout(Duration::from_secs(60), leader_killed_mid_burst())
        .await
        .expect("the test finishes within a minute");
}

async fn leader_killed_mid_burst() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let mut cluster = tokio::task::spawn_blocking(|| NatsCluster::start(3))
        .await
        .expect("start cluster");
    let launcher = replicated_launcher(cluster.urls()).await;
    workflow(&pool).await;
    schedule(&pool, "s", "allow", None).await;
    burst(&pool).await;

    // The first rounds publish part of the burst (batches of 100).
    let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), config());
    for _ in 0..3 {
        let round = dispatcher.round().await.expect("round");
        assert_eq!(round.enqueued, 100, "{round:?}");
    }
    let old_leader = leader(&cluster, None, Duration::from_secs(5)).await;

    // The loop publishes the rest; the leader dies as it starts.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let looping = tokio::spawn({
        let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), config());
        async move { dispatcher.run(async { stopped.await.unwrap_or(()) }).await }
    });
    tokio::task::block_in_place(|| cluster.kill(old_leader));
    let new_leader = leader(&cluster, Some(old_leader), Duration::from_secs(20)).await;
    until(
        Duration::from_secs(30),
        "every run enqueued after the election",
        || async { count_enqueued(&pool).await == RUNS as usize },
    )
    .await;
    stop.send(()).expect("loop alive");
    looping.await.expect("join").expect("loop ends cleanly");

    // Read back from a node that survived, on a connection of its own.
    let survivor = (0..cluster.size())
        .find(|index| *index != old_leader)
        .expect("a surviving node");
    let reader = replicated_launcher(cluster.url(survivor)).await;
    let ids = stream_ids(&reader).await;
    let distinct: HashSet<&String> = ids.iter().collect();
    let keys: HashSet<String> = (0..RUNS).map(key).collect();
    assert_eq!(
        ids.len(),
        RUNS as usize,
        "one message per run (new leader n{new_leader})"
    );
    assert_eq!(distinct.len(), ids.len(), "no run published twice");
    assert_eq!(
        distinct.into_iter().cloned().collect::<HashSet<_>>(),
        keys,
        "the message ids are the run keys"
    );
}
