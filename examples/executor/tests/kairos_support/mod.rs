//! kairos around an executor under test, on real PostgreSQL and nats-server: the
//! dispatcher's loop (launches, retries, heartbeat timeouts, dead letters) and the NATS
//! status intake run as `kairos serve` runs them, and a plain subscriber taps every status
//! report so that a test can read what the executor said. The executor is the Rust library
//! or the Python script; a scenario is written once and run against both.

#![allow(dead_code)]

use std::future::{pending, Future};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer};
use futures::StreamExt;
use kairos_core::{Run, RunStatus};
use kairos_executor_example::{Deliver, Reporter, Settings};
use kairos_launcher::status::{read_stream, StatusConsumer, Stored};
use kairos_launcher::{NatsConfig, NatsLauncher};
use kairos_store::runs;
use kairos_store::PgPool;
use kairos_testkit::{sqlx, NatsServer, TestDb};
use kairos_worker::dispatcher::{Dispatcher, DispatcherConfig};
use kairos_worker::intake::Intake;
use kairos_worker::sweep::{SweepConfig, Sweeper};
use serde_json::Value;
use tokio::task::JoinHandle;

/// How long a run may take to end, or a stream to fill, before the test fails. Generous:
/// the scenarios end in seconds, and a deadline only turns a hang into a failure.
const LIMIT: Duration = Duration::from_secs(30);

/// A schedule's failure handling, as the `schedules` columns hold it.
#[derive(Debug, Clone)]
pub struct Policy {
    /// `max_attempts` (1: no retry).
    pub max_attempts: i32,
    /// `retry_intervals_s` (the last repeats); `None`: retry at once.
    pub retry_intervals_s: Option<Vec<i32>>,
    /// `heartbeat_timeout_s`; `None`: a STARTED run may be silent.
    pub heartbeat_timeout_s: Option<i32>,
}

/// kairos's database, NATS, dispatcher loop and status intake, plus the report tap.
pub struct Kairos {
    /// The test database's pool.
    pub pool: PgPool,
    /// The nats-server everything talks to.
    pub server: NatsServer,
    /// kairos's connection (it created `KAIROS_LAUNCH` and `KAIROS_DLQ`).
    pub launcher: NatsLauncher,
    reports: Arc<Mutex<Vec<Value>>>,
    // The dispatcher loop, the status intake and the tap: aborted on drop, and checked while
    // a test waits, so that one of them dying fails the test at once.
    tasks: Vec<JoinHandle<()>>,
    // Last, so the database outlives the tasks using it.
    _db: TestDb,
}

impl Kairos {
    /// Starts everything: a fresh database, a nats-server, the dispatcher loop (20 ms tick,
    /// 100 ms sweep, so retries and timeouts are seen promptly) and the status intake.
    pub async fn start() -> Kairos {
        let db = TestDb::new().await;
        let pool = db.pool();
        let server = NatsServer::start();
        let launcher = NatsLauncher::connect(NatsConfig::new(server.url()))
            .await
            .expect("connect the launcher");
        let reports = Arc::new(Mutex::new(Vec::new()));
        let tasks = vec![
            tap(&server, reports.clone()).await,
            dispatcher_loop(&pool, &launcher),
            status_intake(&pool, &launcher).await,
        ];
        Kairos {
            pool,
            server,
            launcher,
            reports,
            tasks,
            _db: db,
        }
    }

    /// Serves kairos's HTTP API (no auth, on loopback) on a free port, as `kairos serve`
    /// does; returns its base URL. Stopped on drop with the other tasks.
    pub async fn serve_http(&mut self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the API");
        let address = listener.local_addr().expect("the API's address");
        let auth = kairos_auth::Authenticator::from_config(&kairos_auth::AuthConfig::default())
            .expect("auth none");
        let router = kairos_api::app(kairos_api::AppState {
            registrar: kairos_registrar::Registrar::new(self.pool.clone(), Default::default()),
            auth: Arc::new(auth),
            max_body_bytes: 1 << 20,
            allowed_hosts: kairos_api::AllowedHosts::for_bind(address),
            intake: Intake::new(self.pool.clone()),
            nats: None,
            metrics: None,
            status_subjects: self.launcher.config().status_subjects(),
        });
        let limits = kairos_api::ServeLimits {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(10),
            max_connections: 64,
        };
        self.tasks.push(tokio::spawn(async move {
            kairos_api::serve(listener, router, limits, pending())
                .await
                .expect("serve the API");
        }));
        format!("http://{address}")
    }

    /// Stores workflow `name` v1 with `dag`, schedule `name` of it with `policy`, and one
    /// run of that schedule due now; returns the run's key (`name` in hex, padded to 64).
    pub async fn due_run(&self, name: &str, dag: Value, policy: &Policy) -> String {
        assert!(name.len() <= 32, "a key holds 32 bytes of name");
        let key: String = name.bytes().map(|b| format!("{b:02x}")).collect();
        let key = format!("{key:0>64}");
        sqlx::query("insert into workflows (workflow_id, version, dag) values ($1, 1, $2)")
            .bind(name)
            .bind(dag)
            .execute(&self.pool)
            .await
            .expect("insert workflow");
        sqlx::query(
            "insert into schedules (schedule_id, workflow_id, version, user_id, cron_expr, \
             timezone, overlap_policy, max_attempts, retry_intervals_s, heartbeat_timeout_s) \
             values ($1, $1, 1, 'u', '* * * * *', 'UTC', 'skip', $2, $3, $4)",
        )
        .bind(name)
        .bind(policy.max_attempts)
        .bind(policy.retry_intervals_s.clone())
        .bind(policy.heartbeat_timeout_s)
        .execute(&self.pool)
        .await
        .expect("insert schedule");
        sqlx::query(
            "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, \
             workflow_id, version, user_id) values ($1, $2, \
             date_trunc('second', now() - interval '100 milliseconds'), \
             now() - interval '100 milliseconds', $2, 1, 'u')",
        )
        .bind(&key)
        .bind(name)
        .execute(&self.pool)
        .await
        .expect("insert run");
        key
    }

    /// Waits until run `key` has ended (SUCCESS, FAILED or TIMED_OUT: a failure that will be
    /// retried is RETRYING instead) and returns it.
    pub async fn ended(&self, key: &str, executor: &mut Running) -> Run {
        self.until("the run to end", executor, || async {
            let run = runs::get(&self.pool, key).await.expect("read run")?;
            let ended = matches!(
                run.status,
                RunStatus::Success | RunStatus::Failed | RunStatus::TimedOut
            );
            ended.then_some(run)
        })
        .await
    }

    /// Waits until run `key` is in `status` and returns it.
    pub async fn reaches(&self, key: &str, status: RunStatus, executor: &mut Running) -> Run {
        self.until("the run to reach its status", executor, || async {
            let run = runs::get(&self.pool, key).await.expect("read run")?;
            (run.status == status).then_some(run)
        })
        .await
    }

    /// Every status report sent about `key` (heartbeats too), in the order sent, once the
    /// tap has seen `status` about `attempt` (it receives them beside kairos's stream, so
    /// it may lag the run's row by a moment).
    pub async fn reports(&self, key: &str, status: &str, attempt: u64) -> Vec<Value> {
        let about_key = |reports: &[Value]| -> Vec<Value> {
            reports
                .iter()
                .filter(|body| body["idempotency_key"] == key)
                .cloned()
                .collect()
        };
        let deadline = Instant::now() + LIMIT;
        loop {
            let reports = about_key(&self.reports.lock().expect("tap lock"));
            if reports
                .iter()
                .any(|body| body["status"] == status && body["attempt"] == attempt)
            {
                return reports;
            }
            assert!(
                Instant::now() < deadline,
                "no {status} about attempt {attempt} of {key}; reports: {reports:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The messages in `KAIROS_DLQ` once there is at least one.
    pub async fn dead_letters(&self, executor: &mut Running) -> Vec<Stored> {
        self.until("a dead letter in KAIROS_DLQ", executor, || async {
            let letters = read_stream(&self.launcher, "KAIROS_DLQ")
                .await
                .expect("read KAIROS_DLQ");
            (!letters.is_empty()).then_some(letters)
        })
        .await
    }

    /// The `Nats-Msg-Id` of every launch message kairos published, in order.
    pub async fn launches(&self) -> Vec<String> {
        read_stream(&self.launcher, "KAIROS_LAUNCH")
            .await
            .expect("read KAIROS_LAUNCH")
            .into_iter()
            .map(|message| message.msg_id.expect("launch messages carry Nats-Msg-Id"))
            .collect()
    }

    /// Polls `check` every 20 ms until it gives a value; fails the test when [`LIMIT`]
    /// passes or when the executor or one of kairos's tasks stopped meanwhile.
    async fn until<T, F, Fut>(&self, what: &str, executor: &mut Running, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Some(value) = check().await {
                return value;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            executor.assert_alive();
            assert!(
                self.tasks.iter().all(|task| !task.is_finished()),
                "a kairos task (dispatcher, status intake or tap) ended"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Kairos {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Collects every body published on `kairos.status.>` with a plain subscription (the
/// status stream is a work queue that kairos empties, so it cannot be read afterwards).
async fn tap(server: &NatsServer, reports: Arc<Mutex<Vec<Value>>>) -> JoinHandle<()> {
    let client = async_nats::connect(server.url())
        .await
        .expect("connect the tap");
    let mut subscription = client
        .subscribe("kairos.status.>")
        .await
        .expect("subscribe the tap");
    // The subscription is registered with the server once a round trip has completed.
    client.flush().await.expect("flush the tap");
    tokio::spawn(async move {
        let _client = client;
        while let Some(message) = subscription.next().await {
            let body = serde_json::from_slice(&message.payload).expect("a JSON report");
            reports.lock().expect("tap lock").push(body);
        }
    })
}

fn dispatcher_loop(pool: &PgPool, launcher: &NatsLauncher) -> JoinHandle<()> {
    let mut config =
        DispatcherConfig::new(100, Duration::from_millis(20), Duration::from_secs(300));
    config.launch_timeout = Duration::from_secs(3);
    let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), config);
    let sweep = SweepConfig {
        every: Duration::from_millis(100),
        ..SweepConfig::default()
    };
    let sweeper = Sweeper::new(pool.clone(), launcher.clone(), sweep);
    tokio::spawn(async move {
        tokio::join!(dispatcher.run(pending()), sweeper.run(pending()))
            .0
            .expect("dispatcher loop");
    })
}

async fn status_intake(pool: &PgPool, launcher: &NatsLauncher) -> JoinHandle<()> {
    let consumer = StatusConsumer::connect(launcher, kairos_launcher::status::Lane::All)
        .await
        .expect("status consumer");
    let intake = Intake::new(pool.clone());
    tokio::spawn(async move {
        let intake = &intake;
        consumer
            .run(|messages| intake.take_messages(messages), pending())
            .await
            .expect("status intake");
    })
}

/// Which executor a scenario runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Executor {
    /// `kairos_executor_example::run` in this process.
    Rust,
    /// `examples/executor-python/executor.py` as a child process (`python3` with nats-py).
    Python,
}

impl Executor {
    /// The `executor_id` it reports with.
    pub fn id(self) -> &'static str {
        match self {
            Executor::Rust => "rust-1",
            Executor::Python => "python-1",
        }
    }

    /// Starts it on kairos's NATS, reporting status on the NATS subject and `HEARTBEAT`
    /// every `heartbeat_every` while a run works.
    pub async fn start(self, kairos: &Kairos, heartbeat_every: Duration) -> Running {
        match self {
            Executor::Rust => Running::Rust(rust(kairos, self.id(), heartbeat_every).await),
            Executor::Python => Running::Python(python(kairos, self.id(), heartbeat_every)),
        }
    }
}

async fn rust(kairos: &Kairos, executor_id: &str, heartbeat_every: Duration) -> JoinHandle<()> {
    let settings = Settings {
        nats_url: kairos.server.url(),
        stream: "KAIROS_LAUNCH".into(),
        durable: "executor-under-test".into(),
        executor_id: executor_id.into(),
        subject_prefix: "kairos".into(),
        heartbeat_every,
        concurrency: 4,
        ack_wait: Duration::from_secs(30),
        // The scenarios store a due run before they start the executor, so its launch may
        // be in the stream before the executor's durable exists: take the whole stream.
        deliver: Deliver::All,
    };
    let client = async_nats::connect(kairos.server.url())
        .await
        .expect("connect the executor's reporter");
    let reporter = Reporter::Nats {
        jetstream: async_nats::jetstream::new(client),
        prefix: "kairos".into(),
    };
    tokio::spawn(async move {
        let result = kairos_executor_example::run(&settings, &reporter).await;
        panic!("the executor stopped: {result:?}");
    })
}

fn python(kairos: &Kairos, executor_id: &str, heartbeat_every: Duration) -> Child {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../executor-python/executor.py"
    );
    Command::new("python3")
        .arg(script)
        .args(["--nats-url", &kairos.server.url()])
        .args(["--executor-id", executor_id])
        .args([
            "--heartbeat-every",
            &heartbeat_every.as_secs_f64().to_string(),
        ])
        // The scenarios store a due run before they start the executor, so its launch may
        // be in the stream before the executor's durable exists: take the whole stream.
        .args(["--deliver-policy", "all"])
        .spawn()
        .expect("python3 must be installed")
}

/// A started executor; stopped (task aborted, process killed) on drop.
pub enum Running {
    /// The Rust executor's task.
    Rust(JoinHandle<()>),
    /// The Python executor's process.
    Python(Child),
    /// The `kairos-executor` binary's process (see [`Binary`]).
    Binary(Child),
}

impl Running {
    /// Fails the test when the executor has stopped: it never stops on its own.
    pub fn assert_alive(&mut self) {
        match self {
            Running::Rust(task) => assert!(!task.is_finished(), "the Rust executor stopped"),
            Running::Python(child) => {
                if let Some(exit) = child.try_wait().expect("wait for python3") {
                    panic!(
                        "the Python executor exited ({exit}); is nats-py installed? \
                         scripts/test installs it"
                    );
                }
            }
            Running::Binary(child) => {
                if let Some(exit) = child.try_wait().expect("wait for kairos-executor") {
                    panic!("kairos-executor exited ({exit})");
                }
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        match self {
            Running::Rust(task) => task.abort(),
            Running::Python(child) | Running::Binary(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// The `kairos-executor` binary on kairos's NATS, reporting on the NATS status subject (or
/// over HTTP when `args` hold `--kairos-url`), its output collected line by line (and echoed).
pub struct Binary {
    /// The process.
    pub running: Running,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Binary {
    /// The executor id it reports with.
    pub const ID: &'static str = "binary-1";
    /// Its durable consumer's name (the binary's default).
    pub const DURABLE: &'static str = "example-executor";

    /// Starts it with `args` after `--nats-url` and `--executor-id`.
    pub fn start(kairos: &Kairos, args: &[&str]) -> Binary {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kairos-executor"))
            .args(["--nats-url", &kairos.server.url()])
            .args(["--executor-id", Self::ID])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start kairos-executor");
        let stdout = child.stdout.take().expect("piped stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                println!("{line}");
                sink.lock().expect("lines lock").push(line);
            }
        });
        Binary {
            running: Running::Binary(child),
            lines,
        }
    }

    /// How many nodes of `workflow_id` the executor started (it logs each).
    pub fn node_lines(&self, workflow_id: &str) -> usize {
        let prefix = format!("executor: {workflow_id} ");
        self.lines_where(|line| line.starts_with(&prefix) && line.contains(" node "))
    }

    /// How many of its output lines hold `text`.
    pub fn lines_with(&self, text: &str) -> usize {
        self.lines_where(|line| line.contains(text))
    }

    fn lines_where(&self, keep: impl Fn(&str) -> bool) -> usize {
        let lines = self.lines.lock().expect("lines lock");
        lines.iter().filter(|line| keep(line)).count()
    }
}

/// The durable `name` on `KAIROS_LAUNCH`, once the executor has created it.
pub async fn durable(kairos: &Kairos, name: &str, executor: &mut Running) -> consumer::Info {
    consumer_until(kairos, name, executor, |_| true).await
}

/// The durable `name` once nothing is pending or waiting for its ack.
pub async fn settled(kairos: &Kairos, name: &str, executor: &mut Running) -> consumer::Info {
    consumer_until(kairos, name, executor, |info| {
        info.num_ack_pending == 0 && info.num_pending == 0
    })
    .await
}

async fn consumer_until(
    kairos: &Kairos,
    name: &str,
    executor: &mut Running,
    done: impl Fn(&consumer::Info) -> bool,
) -> consumer::Info {
    let client = async_nats::connect(kairos.server.url())
        .await
        .expect("connect");
    let stream = jetstream::new(client)
        .get_stream("KAIROS_LAUNCH")
        .await
        .expect("the launch stream");
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Ok(info) = stream.consumer_info(name).await {
            if done(&info) {
                return info;
            }
        }
        assert!(Instant::now() < deadline, "the durable did not get there");
        executor.assert_alive();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The most runs in flight at one moment: the most [started_at, finished_at) intervals
/// holding one point (the most is reached at some run's start).
pub fn most_at_once(runs: &[Run]) -> usize {
    let span = |run: &Run| {
        (
            run.started_at.expect("started_at"),
            run.finished_at.expect("finished_at"),
        )
    };
    runs.iter()
        .map(|run| {
            let (moment, _) = span(run);
            runs.iter()
                .filter(|other| {
                    let (start, end) = span(other);
                    start <= moment && moment < end
                })
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// One attempt, no heartbeat timeout.
pub fn once() -> Policy {
    Policy {
        max_attempts: 1,
        retry_intervals_s: None,
        heartbeat_timeout_s: None,
    }
}
