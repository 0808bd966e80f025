//! The `kairos serve` instances under test (every role, no leader), on consecutive ports,
//! some with a skewed clock (`LD_PRELOAD` of libfaketime), and the signals the faults send
//! them: kill -9 and start again, SIGSTOP and SIGCONT. Each instance's log is appended to
//! `<log dir>/instance-<i>.log` across restarts.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::process::{Child, Command};

/// Where a libfaketime library may be installed (Debian package `libfaketime`).
const FAKETIME_PATHS: [&str; 3] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
];

/// The libfaketime library: `explicit`, else the first of the usual paths. A missing library
/// is an error: the clock-skew fault is never skipped.
pub fn find_libfaketime(explicit: Option<&Path>) -> Result<PathBuf> {
    let candidates: Vec<PathBuf> = match explicit {
        Some(path) => vec![path.to_path_buf()],
        None => FAKETIME_PATHS.iter().map(PathBuf::from).collect(),
    };
    candidates.into_iter().find(|path| path.exists()).context(
        "libfaketime not found (looked in /usr/lib/*/faketime/libfaketime.so.1): install \
             it with `apt-get install -y faketime` or pass --libfaketime; the clock-skew fault \
             is part of every chaos run",
    )
}

/// How the instances are started.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The `kairos` binary.
    pub kairos: String,
    /// The database URL.
    pub db_url: String,
    /// The NATS URL.
    pub nats_url: String,
    /// HTTP port of instance 0 (instance i listens on port + i).
    pub port: u16,
    /// The libfaketime library.
    pub libfaketime: PathBuf,
    /// FAKETIME offset of each instance (`None`: the real clock).
    pub skews: Vec<Option<String>>,
    /// Where the logs go.
    pub log_dir: PathBuf,
}

#[derive(Debug)]
struct Instance {
    child: Option<Child>,
    stopped: bool,
}

/// The running instances.
#[derive(Debug)]
pub struct Fleet {
    setup: Setup,
    instances: Mutex<Vec<Instance>>,
    http: reqwest::Client,
}

impl Fleet {
    /// Starts every instance and waits until each is ready.
    pub async fn start(setup: Setup) -> Result<Fleet> {
        let fleet = Fleet {
            instances: Mutex::new(
                (0..setup.skews.len())
                    .map(|_| Instance {
                        child: None,
                        stopped: false,
                    })
                    .collect(),
            ),
            setup,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(3))
                .build()?,
        };
        for i in 0..fleet.len() {
            fleet.spawn(i)?;
        }
        for i in 0..fleet.len() {
            fleet.wait_ready(i, Duration::from_secs(60)).await?;
        }
        Ok(fleet)
    }

    /// How many instances there are.
    pub fn len(&self) -> usize {
        self.setup.skews.len()
    }

    /// The HTTP base URL of instance `i`.
    pub fn base_url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.setup.port + i as u16)
    }

    /// The log file of instance `i`.
    pub fn log_path(&self, i: usize) -> PathBuf {
        self.setup.log_dir.join(format!("instance-{i}.log"))
    }

    fn spawn(&self, i: usize) -> Result<()> {
        self.spawn_with(i, None)
    }

    /// Starts instance `i`, aborting at the crash point `crash_at` when given.
    fn spawn_with(&self, i: usize, crash_at: Option<&str>) -> Result<()> {
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(self.log_path(i))?;
        let mut command = Command::new(&self.setup.kairos);
        command
            .arg("serve")
            .env("DATABASE_URL", &self.setup.db_url)
            .env("KAIROS_NATS__URL", &self.setup.nats_url)
            .env(
                "KAIROS_HTTP__BIND",
                format!("127.0.0.1:{}", self.setup.port + i as u16),
            )
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true);
        if let Some(point) = crash_at {
            command.env("KAIROS_CRASH_AT", point);
        }
        if let Some(skew) = &self.setup.skews[i] {
            command
                .env("LD_PRELOAD", &self.setup.libfaketime)
                .env("FAKETIME", skew);
        }
        let child = command
            .spawn()
            .with_context(|| format!("start {} serve", self.setup.kairos))?;
        let mut instances = self.instances.lock().expect("not poisoned");
        instances[i] = Instance {
            child: Some(child),
            stopped: false,
        };
        Ok(())
    }

    /// Kills instance `i` with SIGKILL (as a crash would) and starts it again after
    /// `down`; returns once it answers `/readyz` (within 60 s, else an error).
    pub async fn kill_and_restart(&self, i: usize, down: Duration) -> Result<()> {
        let child = self.instances.lock().expect("not poisoned")[i].child.take();
        if let Some(mut child) = child {
            child.start_kill()?;
            child.wait().await?;
        }
        tokio::time::sleep(down).await;
        self.spawn(i)?;
        self.wait_ready(i, Duration::from_secs(60)).await
    }

    /// Kills instance `i`, starts it with the crash point `point` (it aborts, as `kill -9`
    /// would, when it reaches it: in the middle of applying a batch of status reports), waits
    /// for that abort (60 s at most, else an error), then starts it normally and returns once
    /// it answers `/readyz`.
    pub async fn crash_at(&self, i: usize, point: &str) -> Result<()> {
        let child = self.instances.lock().expect("not poisoned")[i].child.take();
        if let Some(mut child) = child {
            child.start_kill()?;
            child.wait().await?;
        }
        self.spawn_with(i, Some(point))?;
        let child = self.instances.lock().expect("not poisoned")[i].child.take();
        let Some(mut child) = child else {
            anyhow::bail!("instance {i} did not start");
        };
        match tokio::time::timeout(Duration::from_secs(60), child.wait()).await {
            Ok(status) => {
                if status?.success() {
                    anyhow::bail!("instance {i} exited cleanly instead of aborting at {point}");
                }
            }
            Err(_) => {
                let _ = child.start_kill();
                anyhow::bail!("instance {i} did not reach the crash point {point} within 60 s");
            }
        }
        self.spawn(i)?;
        self.wait_ready(i, Duration::from_secs(60)).await
    }

    /// Sends SIGSTOP (`stop = true`) or SIGCONT to instance `i`.
    pub fn signal_stop(&self, i: usize, stop: bool) -> Result<()> {
        let mut instances = self.instances.lock().expect("not poisoned");
        let pid = instances[i]
            .child
            .as_ref()
            .and_then(Child::id)
            .context("instance is not running")?;
        let signal = if stop { "-STOP" } else { "-CONT" };
        let status = std::process::Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()?;
        if !status.success() {
            bail!("kill {signal} {pid} failed");
        }
        instances[i].stopped = stop;
        Ok(())
    }

    /// Whether instance `i` is stopped (SIGSTOP) now.
    pub fn stopped(&self, i: usize) -> bool {
        self.instances.lock().expect("not poisoned")[i].stopped
    }

    /// Whether instance `i` answers `/readyz` with 200 now.
    pub async fn ready(&self, i: usize) -> bool {
        let url = format!("{}/readyz", self.base_url(i));
        matches!(self.http.get(&url).send().await, Ok(answer) if answer.status().is_success())
    }

    /// Waits until instance `i` answers `/readyz` with 200.
    pub async fn wait_ready(&self, i: usize, limit: Duration) -> Result<()> {
        let started = Instant::now();
        while !self.ready(i).await {
            if started.elapsed() > limit {
                bail!(
                    "instance {i} not ready within {} s (its log: {})",
                    limit.as_secs(),
                    self.log_path(i).display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Kills every instance (SIGCONT first, so a stopped one can die).
    pub fn stop_all(&self) {
        let mut instances = self.instances.lock().expect("not poisoned");
        for instance in instances.iter_mut() {
            if let Some(child) = instance.child.as_mut() {
                if let Some(pid) = child.id() {
                    let _ = std::process::Command::new("kill")
                        .args(["-CONT", &pid.to_string()])
                        .status();
                }
                let _ = child.start_kill();
            }
        }
    }
}
