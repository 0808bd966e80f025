//! The run's own PostgreSQL high-availability cluster for the failover scenarios
//! (`--ha sync` or `--ha async`): `scripts/ha up [--sync]` (etcd, two PostgreSQL nodes under
//! Patroni, HAProxy routing to the leader) in a directory of the run's own, its primary
//! killed (`kill-primary`) or switched over (`switchover`) as faults, and `scripts/ha down`
//! on drop. The instances know only HAProxy's address.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The cluster's replication mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Patroni's `synchronous_mode` and `synchronous_mode_strict`: a commit is acknowledged
    /// once the replica has it.
    Sync,
    /// Patroni's default asynchronous replication.
    Async,
}

/// A cluster started by `scripts/ha up`.
#[derive(Debug)]
pub struct Cluster {
    script: PathBuf,
    dir: PathBuf,
    url: String,
    lost_tail: bool,
}

impl Cluster {
    /// `scripts/ha up` in `mode`, with its state in a new directory; waits until it takes
    /// writes.
    /// `lost_tail` (see [`Cluster::kill_primary`]) raises Patroni's `maximum_lag_on_failover`
    /// to 64 MiB, so a standby that missed the tail is still promoted.
    pub fn up(script: &Path, mode: Mode, lost_tail: bool) -> Result<Cluster> {
        let dir = std::env::temp_dir().join(format!("kairos-chaos-ha-{}", std::process::id()));
        let mut cluster = Cluster {
            script: script.to_path_buf(),
            dir,
            url: String::new(),
            lost_tail,
        };
        let args: &[&str] = match mode {
            Mode::Sync => &["up", "--sync"],
            Mode::Async => &["up"],
        };
        let stdout = cluster.ha(args)?;
        cluster.url = stdout
            .trim()
            .strip_prefix("DATABASE_URL=")
            .with_context(|| format!("scripts/ha up printed {stdout:?}"))?
            .to_string();
        Ok(cluster)
    }

    /// The address of `database` behind HAProxy.
    pub fn url(&self, database: &str) -> String {
        let (server, _) = self.url.rsplit_once('/').unwrap_or((&self.url, ""));
        format!("{server}/{database}")
    }

    /// SIGKILL to the leader's postmaster; returns at once. With `lost_tail`, its WAL
    /// senders are stopped that long before: the commits of that time reach no standby.
    pub fn kill_primary(&self, lost_tail: Option<std::time::Duration>) -> Result<()> {
        match lost_tail {
            None => self.ha(&["kill-primary"]),
            Some(tail) => {
                let ms = tail.as_millis().to_string();
                self.ha(&["kill-primary", "--lost-tail-ms", &ms])
            }
        }
        .map(|_| ())
    }

    /// A planned switchover to the other node; returns once it is done.
    pub fn switchover(&self) -> Result<()> {
        self.ha(&["switchover"]).map(|_| ())
    }

    /// Where the cluster's logs are (for messages when something fails).
    pub fn log_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }

    fn ha(&self, args: &[&str]) -> Result<String> {
        let output = Command::new("bash")
            .arg(&self.script)
            .args(args)
            .env("HA_DIR", &self.dir)
            .env(
                "HA_MAXIMUM_LAG",
                if self.lost_tail {
                    "67108864"
                } else {
                    "1048576"
                },
            )
            .output()
            .with_context(|| format!("run {} {}", self.script.display(), args.join(" ")))?;
        if !output.status.success() {
            bail!(
                "scripts/ha {} failed ({}): {}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.ha(&["down"]);
    }
}
