//! The kairos instances under test: `--instances` `kairos serve` processes (every role, no
//! leader) on consecutive ports, and what they cost, read from `/proc`.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::process::{Child, Command};

use crate::setup::Scratch;
use crate::Args;

/// What one instance used.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    /// CPU seconds (user + system) since [`Fleet::baseline`].
    pub cpu_s: f64,
    /// Resident set size now (MiB).
    pub rss_mib: f64,
    /// Its high-water mark since the process started (MiB).
    pub rss_hwm_mib: f64,
}

/// The running instances.
#[derive(Debug)]
pub struct Fleet {
    children: Vec<Child>,
    ports: Vec<u16>,
    cpu_baseline: Vec<f64>,
}

impl Fleet {
    /// Starts the instances and waits until each answers `/readyz` with 200 (60 s).
    pub async fn start(args: &Args, scratch: &Scratch) -> Result<Fleet> {
        let mut children = Vec::new();
        let mut ports = Vec::new();
        for i in 0..args.instances {
            let port = args.port + i as u16;
            let log =
                std::fs::File::create(std::env::temp_dir().join(format!("kairos-bench-{i}.log")))?;
            let mut command = Command::new(&args.kairos);
            if args.mode == crate::Mode::Queue {
                command.env("KAIROS_SCHEDULER__LAUNCH_DEADLINE_S", "15");
            }
            if let Some(partitions) = args.status_partitions {
                command.env("KAIROS_NATS__STATUS_PARTITIONS", partitions.to_string());
            }
            if let Some(size) = args.nats_cluster {
                command.env("KAIROS_NATS__REPLICAS", size.to_string());
            }
            let child = command
                .arg("serve")
                .env("DATABASE_URL", &scratch.db_url)
                .env("KAIROS_NATS__URL", &scratch.nats_url)
                .env("KAIROS_HTTP__BIND", format!("127.0.0.1:{port}"))
                .stdout(log.try_clone()?)
                .stderr(log)
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("start {} serve", args.kairos))?;
            children.push(child);
            ports.push(port);
        }
        let fleet = Fleet {
            cpu_baseline: vec![0.0; children.len()],
            children,
            ports,
        };
        for i in 0..fleet.ports.len() {
            fleet.wait_ready(i).await?;
        }
        Ok(fleet)
    }

    /// The HTTP base URL of instance `i`.
    pub fn base_url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[i])
    }

    async fn wait_ready(&self, i: usize) -> Result<()> {
        let url = format!("{}/readyz", self.base_url(i));
        let started = Instant::now();
        loop {
            if let Ok(answer) = reqwest::get(&url).await {
                if answer.status().is_success() {
                    return Ok(());
                }
            }
            if started.elapsed() > Duration::from_secs(60) {
                bail!(
                    "instance {i} not ready at {url} within 60 s (its log: {})",
                    std::env::temp_dir()
                        .join(format!("kairos-bench-{i}.log"))
                        .display()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Starts counting CPU from now.
    pub fn baseline(&mut self) {
        self.cpu_baseline = self.pids().map(|pid| self.cpu_s(pid)).collect();
    }

    /// Each instance's usage.
    pub fn usage(&self) -> Vec<Usage> {
        self.pids()
            .zip(&self.cpu_baseline)
            .map(|(pid, base)| {
                let status =
                    std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
                Usage {
                    cpu_s: self.cpu_s(pid) - base,
                    rss_mib: status_kib(&status, "VmRSS:") / 1024.0,
                    rss_hwm_mib: status_kib(&status, "VmHWM:") / 1024.0,
                }
            })
            .collect()
    }

    /// Stops the instances the way an operator would (SIGTERM), so each finishes its round
    /// and commits it, and waits for them to exit (30 s, then kills). After this, every
    /// message in the stream has its run recorded as published: a dispatcher's open round
    /// has messages acknowledged that its transaction has not yet recorded.
    pub async fn shutdown(&mut self) {
        for pid in self.pids().collect::<Vec<_>>() {
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await;
        }
        for child in &mut self.children {
            if tokio::time::timeout(Duration::from_secs(30), child.wait())
                .await
                .is_err()
            {
                let _ = child.start_kill();
            }
        }
    }

    /// The instances' process ids.
    pub fn instance_pids(&self) -> Vec<u32> {
        self.pids().collect()
    }

    fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.children.iter().filter_map(Child::id)
    }

    /// User + system CPU seconds of `pid` (its own, not its children's).
    fn cpu_s(&self, pid: u32) -> f64 {
        crate::machine::Stat::read(pid, crate::machine::clock_ticks())
            .map_or(0.0, |stat| stat.own_s)
    }
}

/// A `kB` line of `/proc/<pid>/status`.
fn status_kib(status: &str, key: &str) -> f64 {
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap_or(0.0)
}
