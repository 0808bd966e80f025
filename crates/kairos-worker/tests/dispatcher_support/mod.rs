//! Fixtures shared by the dispatcher tests: rows written with plain SQL relative to the
//! database clock, a real nats-server with a launcher, and readers for the stream.

#![allow(dead_code)]

use kairos_testkit::sqlx;
use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant};

use kairos_core::RunStatus;
use kairos_launcher::status::read_stream;
use kairos_launcher::{NatsConfig, NatsLauncher};
use kairos_store::PgPool;
use kairos_testkit::NatsServer;
use kairos_worker::dispatcher::DispatcherConfig;
use kairos_worker::sweep::{SweepConfig, Sweeper};

/// A 64-hex key for test run `n`.
pub fn key(n: u64) -> String {
    format!("{n:064x}")
}

/// Stores workflow `wf` version 1 with a one-node DAG (once; again is a no-op).
pub async fn workflow(pool: &PgPool) {
    kairos_testkit::store_workflow(pool, "wf", 1).await;
}

/// Stores a schedule of `wf` v1 with the overlap policy and max_run_seconds given.
pub async fn schedule(pool: &PgPool, id: &str, overlap: &str, max_run_seconds: Option<i32>) {
    sqlx::query(
        "insert into schedules (schedule_id, workflow_id, version, user_id, cron_expr, timezone, \
         overlap_policy, max_run_seconds) values ($1, 'wf', 1, 'u', '* * * * *', 'UTC', $2, $3)",
    )
    .bind(id)
    .bind(overlap)
    .bind(max_run_seconds)
    .execute(pool)
    .await
    .expect("insert schedule");
}

/// A PENDING run of `schedule_id` (workflow `wf` v1) due `offset_s` seconds from the
/// database's now (negative: overdue).
pub async fn run(pool: &PgPool, key: &str, schedule_id: &str, offset_s: f64) {
    sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, workflow_id, \
         version, user_id) values ($1, $2, date_trunc('second', now() + make_interval(secs => $3)), \
         now() + make_interval(secs => $3), 'wf', 1, 'u')",
    )
    .bind(key)
    .bind(schedule_id)
    .bind(offset_s)
    .execute(pool)
    .await
    .expect("insert run");
}

/// Workflow `wf`, an `allow` schedule `s`, and `n` of its runs due from a second ago, 10 ms
/// apart. Returns their keys, in `fire_at` order.
pub async fn allow_runs_due(pool: &PgPool, n: usize) -> Vec<String> {
    workflow(pool).await;
    schedule(pool, "s", "allow", None).await;
    let keys: Vec<String> = (0..n as u64).map(key).collect();
    for (i, key) in keys.iter().enumerate() {
        run(pool, key, "s", -1.0 + i as f64 / 100.0).await;
    }
    keys
}

/// Status of every run by key.
pub async fn statuses(pool: &PgPool) -> HashMap<String, RunStatus> {
    sqlx::query_as::<_, (String, String)>("select idempotency_key, status from schedule_runs")
        .fetch_all(pool)
        .await
        .expect("statuses")
        .into_iter()
        .map(|(key, status)| (key, status.parse().expect("a run status")))
        .collect()
}

/// One column of one run.
pub async fn field(pool: &PgPool, key: &str, column: &str) -> Option<String> {
    sqlx::query_scalar(&format!(
        "select {column}::text from schedule_runs where idempotency_key = $1"
    ))
    .bind(key)
    .fetch_one(pool)
    .await
    .expect("read run field")
}

/// A nats-server and a launcher on it (short ack timeout, so outages fail fast).
pub async fn nats() -> (NatsServer, NatsLauncher) {
    let server = NatsServer::start();
    let launcher = launcher(&server).await;
    (server, launcher)
}

/// Another launcher (connection) on `server`.
pub async fn launcher(server: &NatsServer) -> NatsLauncher {
    let mut config = NatsConfig::new(server.url());
    config.ack_timeout = Duration::from_secs(1);
    NatsLauncher::connect(config)
        .await
        .expect("connect launcher")
}

/// Test dispatcher settings: batch 100, 20 ms tick, 300 s deadline, 3 s launch timeout.
pub fn config() -> DispatcherConfig {
    let mut config =
        DispatcherConfig::new(100, Duration::from_millis(20), Duration::from_secs(300));
    config.launch_timeout = Duration::from_secs(3);
    config
}

/// [`config`] with a pre-staging lead of `lead_ms`.
pub fn prestaged(lead_ms: u64) -> DispatcherConfig {
    let mut config = config();
    config.prestage = Duration::from_millis(lead_ms);
    config
}

/// Test sweeper settings: a sweep every 20 ms, the default time-outs.
pub fn sweep_config() -> SweepConfig {
    SweepConfig {
        every: Duration::from_millis(20),
        ..SweepConfig::default()
    }
}

/// A sweeper over `pool` with [`sweep_config`], on its own clone of `launcher`.
pub fn sweeper(pool: &PgPool, launcher: &NatsLauncher) -> Sweeper<NatsLauncher> {
    Sweeper::new(pool.clone(), launcher.clone(), sweep_config())
}

/// The `Nats-Msg-Id` of every launch message, in stream order.
pub async fn stream_ids(launcher: &NatsLauncher) -> Vec<String> {
    read_stream(launcher, "KAIROS_LAUNCH")
        .await
        .expect("read stream")
        .into_iter()
        .map(|m| m.msg_id.expect("every launch message has Nats-Msg-Id"))
        .collect()
}

/// Polls `check` until it is true or `limit` passes (then panics with `what`).
pub async fn until<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Rounds until one claims nothing; how many rounds claimed something.
pub async fn drain<L: kairos_launcher::RunLauncher>(
    dispatcher: &kairos_worker::dispatcher::Dispatcher<L>,
) -> usize {
    for rounds in 0..1_000 {
        if dispatcher.round().await.expect("round").claimed == 0 {
            return rounds;
        }
    }
    panic!("dispatcher never ran dry");
}

/// A task running until its `stop` is sent to (or dropped), and its handle.
pub struct Looping {
    /// Ends the task.
    pub stop: tokio::sync::oneshot::Sender<()>,
    /// The task.
    pub task: tokio::task::JoinHandle<()>,
}

impl Looping {
    /// Stops the task and waits for it.
    pub async fn end(self) {
        let _ = self.stop.send(());
        self.task.await.expect("join");
    }
}

/// Runs `dispatcher`'s loop (rounds, wake-ups) and `sweeper`'s beside it, as `kairos
/// serve` does, until stopped.
pub fn spawn_dispatcher(
    dispatcher: std::sync::Arc<kairos_worker::dispatcher::Dispatcher<NatsLauncher>>,
    sweeper: Sweeper<NatsLauncher>,
) -> Looping {
    use futures::FutureExt;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let shutdown = async { stopped.await.unwrap_or(()) }.shared();
        let (dispatched, ()) =
            tokio::join!(dispatcher.run(shutdown.clone()), sweeper.run(shutdown));
        dispatched.expect("dispatcher loop");
    });
    Looping { stop, task }
}

/// Feeds the NATS status stream to an intake over `pool` until stopped.
pub async fn spawn_status_intake(pool: &PgPool, launcher: &NatsLauncher) -> Looping {
    let consumer = kairos_launcher::status::StatusConsumer::connect(
        launcher,
        kairos_launcher::status::Lane::All,
    )
    .await
    .expect("status consumer");
    let intake = kairos_worker::intake::Intake::new(pool.clone());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let shutdown = async { stopped.await.unwrap_or(()) };
        let intake = &intake;
        consumer
            .run(|messages| intake.take_messages(messages), shutdown)
            .await
            .expect("status consumer ends cleanly");
    });
    Looping { stop, task }
}

/// Applies an executor's report to run `key` through an intake of its own and returns
/// what it did.
pub async fn report(
    pool: &PgPool,
    key: &str,
    status: kairos_core::Reported,
    executor: &str,
) -> kairos_worker::intake::Applied {
    let report = kairos_worker::intake::StatusReport {
        status,
        attempt: None,
        retryable: None,
        run_id: None,
        executor_id: Some(executor.into()),
        error: None,
        log_url: None,
        output: None,
    };
    kairos_worker::intake::Intake::new(pool.clone())
        .report(key, &report)
        .await
        .expect("a refusal is an answer, not a database error")
}
