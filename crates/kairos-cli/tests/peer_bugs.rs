//! Regression tests named after bugs other schedulers shipped (`conformance/matrix.toml`
//! lists them), on real `kairos serve` processes with a real PostgreSQL and nats-server.

use crate::support;

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kairos_launcher::status::read_stream;
use kairos_launcher::{NatsConfig, NatsLauncher};
use kairos_testkit::sqlx;
use support::{http, Served};

const ROLES: &str = "api,planner,dispatcher,status";

/// A second `kairos serve`, killed when dropped.
struct Twin(Child);

impl Drop for Twin {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The scratch database `Served` made for `db_tag` (the same rule as the harness).
fn db_url(db_tag: &str) -> String {
    let base = std::env::var("KAIROS_TEST_DATABASE_URL").expect("KAIROS_TEST_DATABASE_URL");
    let db_name = format!("kairos_{db_tag}_test_{}", std::process::id());
    format!("{}/{db_name}", base.rsplit_once('/').expect("url").0)
}

/// oban-py#32: two nodes that shared a name inserted a tick three times. Two `kairos serve`
/// instances with every role, the same host name (`HOSTNAME`) and the same configuration
/// (the same database, NATS and settings; only the HTTP port differs, as it must on one
/// host) run a schedule firing every second for 8 s: each second is one run, and the launch
/// stream holds one message per published run, each with its own id.
#[test]
fn oban_py_32_two_instances_with_one_host_name_and_config_fire_each_tick_once() {
    let log = tempfile::tempfile().expect("log file");
    let same_name = [("HOSTNAME", "kairos-node")];
    let first = Served::start_logging(ROLES, "samename", &log, &same_name);
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let mut second = Twin(
        Command::new(env!("CARGO_BIN_EXE_kairos"))
            .args(["serve", "--roles", ROLES])
            .env("DATABASE_URL", db_url("samename"))
            .env("KAIROS_NATS__URL", first.nats.url())
            .env("KAIROS_HTTP__BIND", format!("127.0.0.1:{port}"))
            .envs(same_name)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the second instance"),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !http(port, "GET", "/readyz", "")
        .unwrap_or_default()
        .contains(" 200 ")
    {
        assert!(
            second.0.try_wait().expect("wait").is_none(),
            "second exited"
        );
        assert!(
            Instant::now() < deadline,
            "the second instance is not ready"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let dag = r#"{"dag": {"nodes": [{"id": "a"}]}}"#;
    let put = first.send("PUT", "/workflows/wf/versions/1", dag);
    assert!(put.contains(" 201 "), "{put}");
    let schedule = r#"{"schedule_id": "every-second", "workflow_id": "wf", "version": 1,
        "user_id": "u", "cron_expr": "* * * * * *", "timezone": "UTC",
        "overlap_policy": "allow"}"#;
    let upsert = first.send("POST", "/schedules/upsert", schedule);
    assert!(upsert.contains(" 201 "), "{upsert}");
    std::thread::sleep(Duration::from_secs(8));
    assert!(
        second.0.try_wait().expect("wait").is_none(),
        "second exited"
    );
    drop(second);

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (runs, ids) = runtime.block_on(async {
        let pool = sqlx::PgPool::connect(&db_url("samename"))
            .await
            .expect("connect");
        let runs: Vec<(i64, String, bool)> = sqlx::query_as(
            "select extract(epoch from run_at)::bigint, idempotency_key, \
               published_at is not null from schedule_runs \
             where schedule_id = 'every-second' order by run_at",
        )
        .fetch_all(&pool)
        .await
        .expect("runs");
        pool.close().await;
        let launcher = NatsLauncher::connect(NatsConfig::new(first.nats.url()))
            .await
            .expect("connect to nats");
        let ids: Vec<String> = read_stream(&launcher, "KAIROS_LAUNCH")
            .await
            .expect("read the launch stream")
            .into_iter()
            .map(|m| m.msg_id.expect("every launch message has Nats-Msg-Id"))
            .collect();
        (runs, ids)
    });

    let seconds: Vec<i64> = runs.iter().map(|(second, _, _)| *second).collect();
    assert!(seconds.len() >= 6, "8 s of ticks: {seconds:?}");
    let expected: Vec<i64> = (seconds[0]..=seconds[seconds.len() - 1]).collect();
    assert_eq!(
        seconds, expected,
        "every second once, none twice, none missing"
    );
    let distinct: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len(), "a message id twice: {ids:?}");
    let published: BTreeSet<&String> = runs
        .iter()
        .filter(|(_, _, published)| *published)
        .map(|(_, key, _)| key)
        .collect();
    assert!(published.len() >= 5, "the instances published: {runs:?}");
    assert!(
        published.is_subset(&distinct),
        "every published run is one message"
    );
    let keys: BTreeSet<&String> = runs.iter().map(|(_, key, _)| key).collect();
    assert!(
        distinct.is_subset(&keys),
        "every message is a run of the schedule"
    );
}
