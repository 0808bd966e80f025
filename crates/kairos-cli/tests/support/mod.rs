//! A real `kairos serve` for the CLI's integration tests: its own nats-server, its own
//! scratch database (dropped, and the process killed, however the test ends), a free port,
//! and a wait until `/readyz` answers 200.

#![allow(dead_code)] // Each test binary uses a part of this harness.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use kairos_testkit::NatsServer;

/// One HTTP/1.0 exchange on loopback; `None` when nothing answers.
pub fn http(port: u16, method: &str, path: &str, body: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer)
}

/// `kairos <args>` against the API of the `kairos serve` on `port`, without a token.
pub fn kairos(port: u16, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kairos"))
        .args(args)
        .env("KAIROS_URL", format!("http://127.0.0.1:{port}"))
        .env_remove("KAIROS_TOKEN")
        .output()
        .expect("run kairos")
}

/// The standard output of a command that must have succeeded (else its standard error).
pub fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).expect("utf-8")
}

/// A running `kairos serve` and what it owns.
pub struct Served {
    /// The process (tests may signal it).
    pub child: Child,
    /// Its HTTP port on 127.0.0.1.
    pub port: u16,
    /// Its nats-server (tests may stop and restart it).
    pub nats: NatsServer,
    base: String,
    db_name: String,
}

impl Served {
    /// Starts `kairos serve --roles <roles>` and waits until it is ready (at most 30 s).
    pub fn start(roles: &str, db_tag: &str) -> Served {
        let mut served = Served::launch(roles, db_tag, NatsServer::start());
        served.wait_for("/readyz", " 200 ");
        served
    }

    /// Starts `kairos serve --roles <roles>` against `nats` (running or not) and waits only
    /// until the process answers `/healthz`.
    pub fn launch(roles: &str, db_tag: &str, nats: NatsServer) -> Served {
        Served::launch_with(roles, db_tag, nats, &[])
    }

    /// [`Served::launch`] with more arguments after `serve --roles <roles>` (e.g.
    /// `--config FILE`).
    pub fn launch_with(roles: &str, db_tag: &str, nats: NatsServer, extra: &[&str]) -> Served {
        Served::spawn(roles, db_tag, nats, extra, Stdio::null(), &[])
    }

    /// Starts `kairos serve --roles <roles>` against `nats` with the environment variables
    /// `envs` added, and waits until it is ready.
    pub fn start_with_env(
        roles: &str,
        db_tag: &str,
        nats: NatsServer,
        envs: &[(&str, &str)],
    ) -> Served {
        let mut served = Served::spawn(roles, db_tag, nats, &[], Stdio::null(), envs);
        served.wait_for("/readyz", " 200 ");
        served
    }

    /// Another `kairos serve --roles <roles>` on this one's database and nats-server, with
    /// `envs` added; it answers `/healthz` when this returns.
    pub fn peer(&self, roles: &str, envs: &[(&str, &str)]) -> Peer {
        let port = free_port();
        let child = serve_command(roles, &self.db_url(), &self.nats, port, envs)
            .stdout(Stdio::null())
            .spawn()
            .expect("start kairos serve");
        let mut peer = Peer { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !http(port, "GET", "/healthz", "").is_some_and(|answer| answer.contains(" 200 ")) {
            assert!(
                peer.child.try_wait().expect("wait").is_none(),
                "the peer exited while starting"
            );
            assert!(
                Instant::now() < deadline,
                "the peer did not answer /healthz within 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        peer
    }

    /// The served database's URL.
    pub fn db_url(&self) -> String {
        database_url(&self.base, &self.db_name)
    }

    /// Starts `kairos serve --roles <roles>` with its stdout written to `log` and the
    /// environment variables `envs` added, and waits until it is ready.
    pub fn start_logging(roles: &str, db_tag: &str, log: &File, envs: &[(&str, &str)]) -> Served {
        let stdout = Stdio::from(log.try_clone().expect("clone the log file"));
        let mut served = Served::spawn(roles, db_tag, NatsServer::start(), &[], stdout, envs);
        served.wait_for("/readyz", " 200 ");
        served
    }

    fn spawn(
        roles: &str,
        db_tag: &str,
        nats: NatsServer,
        extra: &[&str],
        stdout: Stdio,
        envs: &[(&str, &str)],
    ) -> Served {
        let port = free_port();
        let base = std::env::var("KAIROS_TEST_DATABASE_URL")
            .expect("KAIROS_TEST_DATABASE_URL (set by .cargo/config.toml)");
        let db_name = format!("kairos_{db_tag}_test_{}", std::process::id());
        let db_url = database_url(&base, &db_name);
        let child = serve_command(roles, &db_url, &nats, port, envs)
            .args(extra)
            .stdout(stdout)
            .spawn()
            .expect("start kairos serve");
        let mut served = Served {
            child,
            port,
            nats,
            base,
            db_name,
        };
        served.wait_for("/healthz", " 200 ");
        served
    }

    /// Runs `sql` in the served database with `psql` (for a state no API call makes).
    ///
    /// # Panics
    /// When `psql` fails.
    pub fn psql(&self, sql: &str) {
        self.psql_rows(sql);
    }

    /// Runs `sql` in the served database with `psql`; its rows, unaligned (`-At`).
    ///
    /// # Panics
    /// When `psql` fails.
    pub fn psql_rows(&self, sql: &str) -> String {
        let out = Command::new("psql")
            .args([
                self.db_url().as_str(),
                "-v",
                "ON_ERROR_STOP=1",
                "-qAtc",
                sql,
            ])
            .output()
            .expect("run psql");
        assert!(
            out.status.success(),
            "psql: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Polls `GET path` until its answer contains `expected` (at most 30 s); the answer.
    ///
    /// # Panics
    /// When the process exits or the answer does not come in time.
    pub fn wait_for(&mut self, path: &str, expected: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let answer = self.get(path).unwrap_or_default();
            if answer.contains(expected) {
                return answer;
            }
            assert!(
                self.child.try_wait().expect("wait").is_none(),
                "serve exited while waiting for {path}"
            );
            assert!(
                Instant::now() < deadline,
                "{path} did not answer {expected:?} within 30 s; last answer:\n{answer}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `method path` with a JSON body.
    pub fn send(&self, method: &str, path: &str, body: &str) -> String {
        http(self.port, method, path, body).unwrap_or_default()
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Option<String> {
        http(self.port, "GET", path, "")
    }
}

/// A second `kairos serve` on a [`Served`]'s database; killed on drop.
pub struct Peer {
    /// The process (tests may kill it).
    pub child: Child,
    /// Its HTTP port on 127.0.0.1.
    pub port: u16,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Database `name` on the server of `base` (a URL naming some database).
fn database_url(base: &str, name: &str) -> String {
    format!(
        "{}/{name}",
        base.rsplit_once('/').expect("url with a database").0
    )
}

/// `kairos serve --roles <roles>` on `db_url` and `nats`, answering HTTP on `port`, with the
/// environment variables `envs` added and its standard error dropped.
fn serve_command(
    roles: &str,
    db_url: &str,
    nats: &NatsServer,
    port: u16,
    envs: &[(&str, &str)],
) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kairos"));
    command
        .args(["serve", "--roles", roles])
        .env("DATABASE_URL", db_url)
        .env("KAIROS_NATS__URL", nats.url())
        .env("KAIROS_HTTP__BIND", format!("127.0.0.1:{port}"))
        .envs(envs.iter().copied())
        .stderr(Stdio::null());
    command
}

/// A free port on 127.0.0.1.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port()
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = Command::new("psql")
            .args([
                &self.base,
                "-qc",
                &format!("drop database if exists {}", self.db_name),
            ])
            .stderr(Stdio::null())
            .status();
    }
}

/// The sha256 of `text` as 64 hex digits (a static token's `sha256` in config), computed by
/// `sha256sum`.
pub fn sha256_hex(text: &str) -> String {
    let out = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(text.as_bytes())?;
            child.wait_with_output()
        })
        .expect("sha256sum");
    String::from_utf8(out.stdout).expect("utf8")[..64].to_string()
}
