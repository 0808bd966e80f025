//! `kairos serve` behind PgBouncer (Debian `pgbouncer`, started by the test as the
//! `postgres` user). In `pool_mode = transaction` it refuses at start, before any statement
//! of its own runs, with an error naming the pool mode and what to set instead (a server
//! session shared between clients would mix their prepared statements). In
//! `pool_mode = session` every role works: ticks are planned and published once each, and a
//! status report is applied.

use crate::support;

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::Served;

const PSQL: &str = "psql";

/// The shared PostgreSQL's address with the database `name`.
fn direct(name: &str) -> String {
    let base = std::env::var("KAIROS_TEST_DATABASE_URL")
        .expect("KAIROS_TEST_DATABASE_URL (set by .cargo/config.toml)");
    format!(
        "{}/{name}",
        base.rsplit_once('/').expect("url with a database").0
    )
}

fn sql(url: &str, query: &str) -> String {
    let output = Command::new(PSQL)
        .args(["-X", "-qAt", url, "-c", query])
        .output()
        .expect("run psql");
    assert!(output.status.success(), "{query}: {output:?}");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// A scratch database, created directly (a PgBouncer answers a database that does not
/// exist yet with the cached login error for `server_login_retry`, 15 s), and dropped with
/// its sessions when the test ends.
struct Scratch(String);

impl Scratch {
    fn create(name: &str) -> Scratch {
        sql(&direct("postgres"), &format!("create database {name}"));
        Scratch(name.to_string())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = Command::new(PSQL)
            .args([
                "-X",
                "-q",
                &direct("postgres"),
                "-c",
                &format!("drop database if exists {} with (force)", self.0),
            ])
            .stderr(Stdio::null())
            .status();
    }
}

/// A PgBouncer in front of the shared PostgreSQL, in `mode`; killed when dropped.
struct Bouncer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Bouncer {
    fn start(mode: &str) -> Bouncer {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port")
            .port();
        let ini = dir.path().join("pgbouncer.ini");
        // sqlx sends extra_float_digits at startup, which PgBouncer refuses unless told
        // to ignore it (docs/operations.md says so too).
        std::fs::write(
            &ini,
            format!(
                "[databases]\n* = host=127.0.0.1 port=5432 user=postgres\n\
                 [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\n\
                 unix_socket_dir =\nauth_type = any\npool_mode = {mode}\n\
                 default_pool_size = 80\nmax_client_conn = 400\n\
                 ignore_startup_parameters = extra_float_digits\n\
                 logfile = {}\n",
                dir.path().join("pgbouncer.log").display()
            ),
        )
        .expect("write pgbouncer.ini");
        let mut command = Command::new("pgbouncer");
        // PgBouncer will not run as root: it drops to the postgres user, which must be able
        // to read its directory.
        if is_root() {
            open_to_all(dir.path());
            command.args(["-u", "postgres"]);
        }
        let child = command
            .arg(&ini)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pgbouncer (Debian package pgbouncer)");
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "pgbouncer did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Bouncer {
            child,
            port,
            _dir: dir,
        }
    }

    fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

fn open_to_all(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
}

#[test]
fn transaction_pooling_is_refused_at_start_naming_the_pool_mode() {
    let name = format!("kairos_pooler_tx_test_{}", std::process::id());
    let _scratch = Scratch::create(&name);
    let bouncer = Bouncer::start("transaction");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kairos"))
        .args(["serve"])
        .env("DATABASE_URL", bouncer.url(&name))
        .env("KAIROS_NATS__URL", "nats://127.0.0.1:4222")
        .env("KAIROS_HTTP__BIND", "127.0.0.1:0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kairos serve");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("kairos serve kept running behind a transaction-mode pooler");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("read stderr");
    assert!(!status.success(), "{stderr}");
    for said in [
        "pool_mode = transaction",
        "pool_mode = session or a direct connection",
    ] {
        assert!(stderr.contains(said), "{said:?} not in: {stderr}");
    }
    // Refused before anything of its own ran: no migration, no table.
    let tables = sql(
        &direct(&name),
        "select count(*) from pg_tables where schemaname = 'public'",
    );
    assert_eq!(tables, "0", "nothing written");
}

#[test]
fn session_pooling_fires_every_tick_once_and_applies_reports() {
    let name = format!("kairos_pooler_session_test_{}", std::process::id());
    let _scratch = Scratch::create(&name);
    let bouncer = Bouncer::start("session");
    let root = tempfile::tempdir().expect("tempdir");
    let log = std::fs::File::create(root.path().join("serve.log")).expect("log file");
    let url = bouncer.url(&name);
    let served = Served::start_logging(
        "api,planner,dispatcher,status,retention",
        "pooler_session",
        &log,
        &[("DATABASE_URL", url.as_str())],
    );
    let deploy = r#"{"dag": {"nodes": [{"id": "a"}]}, "schedules": [
        {"schedule_id": "s1", "user_id": "u", "cron_expr": "* * * * * *", "timezone": "UTC",
         "overlap_policy": "allow"}]}"#;
    let answer = served.send("PUT", "/workflows/wf/versions/1", deploy);
    assert!(answer.contains(" 201 "), "{answer}");
    let db = direct(&name);
    let started = Instant::now();
    while sql(
        &db,
        "select count(*) from schedule_runs where published_at is not null",
    )
    .parse::<i64>()
    .unwrap_or(0)
        < 5
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "fewer than 5 ticks published behind a session-mode pooler in 30 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // A status report goes through the intake and is applied.
    let key = sql(
        &db,
        "select idempotency_key from schedule_runs where published_at is not null \
         order by run_at limit 1",
    );
    let answer = served.send(
        "POST",
        &format!("/runs/{key}/status"),
        r#"{"status": "SUCCESS", "executor_id": "e1"}"#,
    );
    assert!(answer.contains(" 200 "), "{answer}");
    assert_eq!(
        sql(
            &db,
            &format!("select status from schedule_runs where idempotency_key = '{key}'")
        ),
        "SUCCESS"
    );
    // Every tick from the first to 2 s ago: one run each, published.
    let gaps = sql(
        &db,
        "select t.at, count(r.run_at), count(r.published_at) \
         from generate_series((select min(run_at) from schedule_runs), \
             date_trunc('second', now()) - interval '2 seconds', interval '1 second') t(at) \
         left join schedule_runs r on r.schedule_id = 's1' and r.run_at = t.at \
         group by t.at having count(r.run_at) <> 1 or count(r.published_at) <> 1",
    );
    assert_eq!(gaps, "", "ticks missing, doubled or unpublished");
    drop(served);
}
