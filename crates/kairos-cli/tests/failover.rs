//! `kairos serve` through a PostgreSQL failover (`scripts/ha up --sync`: Patroni, etcd and
//! HAProxy; the instance knows only HAProxy's address). Two schedules fire every second; the
//! primary's postmaster is killed. While there is no primary `/readyz` answers 503 naming
//! PostgreSQL; the log names the outage once (one "database unavailable" line, one "database
//! answers again", no per-round failure lines); ticks are published again behind the same
//! address, and every tick of the window has exactly one run, published.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::Served;

const PSQL: &str = "/usr/lib/postgresql/15/bin/psql";

/// `scripts/ha` with its state in `dir`; `down` when dropped.
struct Cluster {
    dir: PathBuf,
    url: String,
}

impl Cluster {
    fn up(dir: PathBuf) -> Cluster {
        let output = ha(&dir, &["up", "--sync"]);
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let url = stdout
            .trim()
            .strip_prefix("DATABASE_URL=")
            .unwrap_or_else(|| {
                panic!(
                    "scripts/ha up: {stdout}\n{}",
                    String::from_utf8_lossy(&output.stderr)
                )
            })
            .to_string();
        Cluster { dir, url }
    }

    /// One query through HAProxy; `None` while it fails.
    fn sql(&self, query: &str) -> Option<String> {
        let output = Command::new(PSQL)
            .args(["-X", "-qAt", &self.url, "-c", query])
            .output()
            .expect("run psql");
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
    }

    /// Polls `query` until it answers `wanted` (at most `limit`).
    fn until(&self, query: &str, wanted: impl Fn(&str) -> bool, limit: Duration) -> String {
        let started = Instant::now();
        loop {
            if let Some(answer) = self.sql(query).filter(|a| wanted(a)) {
                return answer;
            }
            assert!(
                started.elapsed() < limit,
                "{query} not as wanted in {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = ha(&self.dir, &["down"]);
    }
}

fn ha(dir: &Path, args: &[&str]) -> std::process::Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ha");
    Command::new("bash")
        .arg(script)
        .args(args)
        .env("HA_DIR", dir)
        .output()
        .expect("run scripts/ha")
}

fn messages(log: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(log)
        .expect("read the log")
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .map(|line| {
            let text = |key: &str| line[key].as_str().unwrap_or_default().to_string();
            let role = line["role"].as_str().unwrap_or_default();
            (text("level"), format!("{} {role}", text("message")))
        })
        .collect()
}

#[test]
fn ticks_are_published_again_after_the_primary_dies_and_the_outage_is_named_once() {
    let root = tempfile::tempdir().expect("tempdir");
    let cluster = Cluster::up(root.path().join("ha"));
    let log = root.path().join("serve.log");
    let file = std::fs::File::create(&log).expect("log file");
    let envs = [
        ("DATABASE_URL", cluster.url.as_str()),
        ("KAIROS_LOG__FORMAT", "json"),
        ("KAIROS_LOG__LEVEL", "info,kairos_worker::outage=debug"),
    ];
    let mut served = Served::start_logging(
        "api,planner,dispatcher,status,retention",
        "failover",
        &file,
        &envs,
    );
    let deploy = r#"{"dag": {"nodes": [{"id": "a"}]}, "schedules": [
        {"schedule_id": "s1", "user_id": "u", "cron_expr": "* * * * * *", "timezone": "UTC",
         "overlap_policy": "allow"},
        {"schedule_id": "s2", "user_id": "u", "cron_expr": "* * * * * *", "timezone": "UTC",
         "overlap_policy": "allow"}]}"#;
    let answer = served.send("PUT", "/workflows/wf/versions/1", deploy);
    assert!(answer.contains(" 201 "), "{answer}");
    let published = "select count(*) from schedule_runs where published_at is not null";
    cluster.until(
        published,
        |n| n.parse().unwrap_or(0) >= 6,
        Duration::from_secs(30),
    );

    let before = cluster.sql("select now()").expect("the database clock");
    let output = ha(&cluster.dir, &["kill-primary"]);
    assert!(output.status.success(), "{output:?}");
    let killed = Instant::now();

    // /readyz names PostgreSQL while there is no primary, and is ready again after.
    let mut refused = None;
    loop {
        let answer = served.get("/readyz").unwrap_or_default();
        if answer.contains(" 503 ") {
            assert!(answer.contains("postgres (database.url)"), "{answer}");
            refused = Some(answer);
        } else if answer.contains(" 200 ") && refused.is_some() {
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(60),
            "not ready again within 60 s (refused: {refused:?})"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Ticks are published again; the first one after the kill, measured.
    let again = format!(
        "select extract(epoch from min(published_at) - '{before}'::timestamptz) \
         from schedule_runs where published_at > '{before}'::timestamptz + interval '1 second'"
    );
    let first = cluster.until(&again, |s| !s.is_empty(), Duration::from_secs(60));
    eprintln!("first publish {first} s after the last write before the kill");
    served.wait_for("/readyz", " 200 ");
    // The outage ends in the log once no role has failed for a while (a role may still hold
    // a pooled connection to the old primary after another one got through).
    let started = Instant::now();
    while !messages(&log)
        .iter()
        .any(|(_, m)| m.contains("database answers again"))
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the outage never ended in the log: {:?}",
            messages(&log)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(3));

    // Every tick from the second before the kill to 3 s ago: one run each, published.
    let gaps = cluster
        .sql(&format!(
            "select s.id, t.at, count(r.run_at), count(r.published_at) \
             from (values ('s1'), ('s2')) s(id) \
             cross join generate_series(date_trunc('second', '{before}'::timestamptz) \
                 - interval '1 second', date_trunc('second', now()) - interval '3 seconds', \
                 interval '1 second') t(at) \
             left join schedule_runs r on r.schedule_id = s.id and r.run_at = t.at \
             group by s.id, t.at having count(r.run_at) <> 1 or count(r.published_at) <> 1"
        ))
        .expect("read the runs");
    assert_eq!(
        gaps, "",
        "ticks missing, doubled or unpublished (id|tick|runs|published)"
    );

    let lines = messages(&log);
    let count = |text: &str| lines.iter().filter(|(_, m)| m.contains(text)).count();
    assert_eq!(count("database unavailable"), 1, "{lines:?}");
    assert_eq!(count("database answers again"), 1, "{lines:?}");
    for failure in [
        "dispatch round failed",
        "dispatch claim failed",
        "planner pass failed",
        "sweep failed",
        "status batch not recorded",
    ] {
        assert_eq!(count(failure), 0, "{failure}: {lines:?}");
    }
    assert!(
        served.child.try_wait().expect("wait").is_none(),
        "serve is still running"
    );
}
