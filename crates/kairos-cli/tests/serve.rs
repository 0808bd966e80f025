//! `kairos serve` as an operator runs it: every role up against a real PostgreSQL and a real
//! nats-server, ready on `/readyz`, metrics on `/metrics`, and a SIGTERM ends it cleanly
//! within the grace bound.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kairos_testkit::NatsServer;

fn get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer)
}

#[test]
fn serve_runs_every_role_and_stops_cleanly_on_sigterm() {
    let nats = NatsServer::start();
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let base = std::env::var("DATABASE_URL").expect("DATABASE_URL (set by .cargo/config.toml)");
    let db_name = format!("kairos_serve_test_{}", std::process::id());
    let db_url = format!(
        "{}/{db_name}",
        base.rsplit_once('/').expect("url with a database").0
    );

    let mut child = Command::new(env!("CARGO_BIN_EXE_kairos"))
        .args(["serve", "--roles", "api,planner,dispatcher,status"])
        .env("DATABASE_URL", &db_url)
        .env("KAIROS_NATS__URL", nats.url())
        .env("KAIROS_HTTP__BIND", format!("127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start kairos serve");

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(answer) = get(port, "/readyz") {
            if answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200") {
                assert!(answer.contains("\"nats\":\"ok\""), "{answer}");
                assert!(answer.contains("\"postgres\":\"ok\""), "{answer}");
                break;
            }
        }
        assert!(
            child.try_wait().expect("wait").is_none(),
            "serve exited before it was ready"
        );
        assert!(Instant::now() < deadline, "serve was not ready within 30 s");
        std::thread::sleep(Duration::from_millis(100));
    }

    // The process's recorder: build info at once, the backlog gauges from the first refresh.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = get(port, "/metrics").unwrap_or_default();
        let version = env!("CARGO_PKG_VERSION");
        if answer.contains(&format!("kairos_build_info{{version=\"{version}\"}} 1"))
            && answer.contains("\nkairos_outbox_pending 0\n")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no metrics within 10 s:\n{answer}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(killed.expect("run kill").success());
    let deadline = Instant::now() + Duration::from_secs(40);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve did not exit within 40 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "serve exited with {status}");

    let _ = Command::new("psql")
        .args([&base, "-qc", &format!("drop database if exists {db_name}")])
        .stderr(Stdio::null())
        .status();
}
