//! `scripts/ha`, the local PostgreSQL HA cluster (etcd, two PostgreSQL 15 nodes under
//! Patroni, HAProxy in front) that the failover scenarios run on. One synchronous cluster:
//! `up` prints one `DATABASE_URL` line, the primary takes writes through it, `kill-primary`
//! returns at once and a new primary takes writes behind the same address with every
//! acknowledged row still there, `switchover` moves the leader back, a second cluster runs
//! beside the first in its own `HA_DIR`, and `down` leaves no process and no directory.
//! The script installs the Debian packages it needs when they are missing; a cluster that
//! cannot start fails the test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const PSQL: &str = "/usr/lib/postgresql/15/bin/psql";

/// How long a new primary may take to take writes after the old one was killed (Patroni's
/// leader lock and HAProxy's health check: about 3–6 s on this machine).
const FAILOVER_LIMIT: Duration = Duration::from_secs(60);

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ha")
}

fn ha(dir: &Path, args: &[&str]) -> Output {
    Command::new("bash")
        .arg(script())
        .args(args)
        .env("HA_DIR", dir)
        .output()
        .expect("run scripts/ha")
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let output = ha(dir, args);
    assert!(
        output.status.success(),
        "scripts/ha {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8")
}

/// `down` when the test ends, passed or not.
struct Cluster {
    dir: PathBuf,
    url: String,
}

impl Cluster {
    fn up(dir: PathBuf, args: &[&str]) -> Cluster {
        let mut line = vec!["up"];
        line.extend_from_slice(args);
        let stdout = ok(&dir, &line);
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 1, "one line on stdout: {stdout:?}");
        let url = lines[0]
            .strip_prefix("DATABASE_URL=")
            .unwrap_or_else(|| panic!("not a DATABASE_URL line: {stdout:?}"))
            .to_string();
        assert!(url.starts_with("postgres://"), "{url}");
        Cluster { dir, url }
    }

    fn status(&self) -> serde_json::Value {
        serde_json::from_str(&ok(&self.dir, &["status"])).expect("status is one JSON object")
    }

    fn leader(&self) -> String {
        self.status()["leader"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// One statement through HAProxy; `None` when it failed (no primary yet).
    fn sql(&self, statement: &str) -> Option<String> {
        let output = Command::new(PSQL)
            .args([
                "-X",
                "-qAt",
                "-v",
                "ON_ERROR_STOP=1",
                &self.url,
                "-c",
                statement,
            ])
            .output()
            .expect("run psql");
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
    }

    /// Waits until a write through HAProxy succeeds; answers how long it took.
    fn until_writable(&self) -> Duration {
        let started = Instant::now();
        while self
            .sql("create temp table probe (); select not pg_is_in_recovery()")
            .as_deref()
            != Some("t")
        {
            assert!(
                started.elapsed() < FAILOVER_LIMIT,
                "no primary took writes within {FAILOVER_LIMIT:?}: {}",
                self.status()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        started.elapsed()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = ha(&self.dir, &["down"]);
    }
}

fn processes_naming(dir: &Path) -> usize {
    let output = Command::new("pgrep")
        .args(["-f", &dir.to_string_lossy()])
        .output()
        .expect("run pgrep");
    String::from_utf8_lossy(&output.stdout).lines().count()
}

#[test]
fn a_synchronous_cluster_fails_over_and_switches_over_behind_one_address() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("sync");
    let cluster = Cluster::up(dir.clone(), &["--sync"]);
    let status = cluster.status();
    assert_eq!(
        status["members"].as_array().map(Vec::len),
        Some(2),
        "{status}"
    );
    let first = cluster.leader();
    assert!(first == "pg1" || first == "pg2", "{status}");
    let standbys = cluster
        .sql("show synchronous_standby_names")
        .unwrap_or_default();
    assert!(!standbys.is_empty(), "synchronous replication is on");
    cluster
        .sql("create table acked (n int); insert into acked select generate_series(1, 1000)")
        .expect("writes through HAProxy");

    // A second cluster beside it, and no second `up` into a directory in use.
    let other = Cluster::up(root.path().join("async"), &[]);
    assert_ne!(other.url, cluster.url);
    assert!(other.sql("select 1").is_some());
    let again = ha(&dir, &["up"]);
    assert!(!again.status.success(), "a second up into one HA_DIR");
    assert!(String::from_utf8_lossy(&again.stderr).contains("HA_DIR"));
    drop(other);

    let killed = Instant::now();
    ok(&dir, &["kill-primary"]);
    assert!(
        killed.elapsed() < Duration::from_secs(5),
        "kill-primary returns at once"
    );
    let took = cluster.until_writable();
    eprintln!("failover: writes again {took:?} after the kill");
    assert_eq!(
        cluster.sql("select count(*) from acked").as_deref(),
        Some("1000"),
        "every acknowledged row survives a failover in synchronous mode"
    );
    let second = cluster.leader();
    assert!(
        !second.is_empty() && second != first,
        "{}",
        cluster.status()
    );

    // The old primary rejoins as a replica; then a planned switchover moves the leader.
    let started = Instant::now();
    while cluster.status()["members"]
        .as_array()
        .is_none_or(|members| members.iter().any(|m| m["state"] != "running"))
    {
        assert!(
            started.elapsed() < FAILOVER_LIMIT,
            "the old primary did not rejoin: {}",
            cluster.status()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    ok(&dir, &["switchover"]);
    assert_eq!(cluster.leader(), first);
    cluster.until_writable();
    cluster
        .sql("insert into acked values (1001)")
        .expect("writes after the switchover");

    drop(cluster);
    assert!(!dir.exists(), "down removes HA_DIR");
    assert_eq!(processes_naming(&dir), 0, "down stops every process");
}
