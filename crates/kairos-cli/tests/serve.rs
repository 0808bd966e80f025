//! `kairos serve` as an operator runs it: every role up against a real PostgreSQL and a real
//! nats-server, ready on `/readyz`, metrics on `/metrics`, and a SIGTERM ends it cleanly
//! within the grace bound; a second deployment that would take over the first one's streams
//! stops with an error naming the stream.

use crate::support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::Served;

#[test]
fn serve_runs_every_role_and_stops_cleanly_on_sigterm() {
    let mut served = Served::start("api,planner,dispatcher,status", "serve");
    let ready = served.get("/readyz").expect("readyz");
    assert!(ready.contains("\"nats\":\"ok\""), "{ready}");
    assert!(ready.contains("\"postgres\":\"ok\""), "{ready}");

    // The process's recorder: build info at once, the backlog gauges from the first refresh.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = served.get("/metrics").unwrap_or_default();
        let version = env!("CARGO_PKG_VERSION");
        if answer.contains(&format!("kairos_build_info{{version=\"{version}\"}} 1"))
            && answer.contains("\nkairos_outbox_pending 0\n")
            && answer.contains("\nkairos_fire_drift_seconds_count 0\n")
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
        .args(["-TERM", &served.child.id().to_string()])
        .status();
    assert!(killed.expect("run kill").success());
    let deadline = Instant::now() + Duration::from_secs(40);
    let status = loop {
        if let Some(status) = served.child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            panic!("serve did not exit within 40 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "serve exited with {status}");
}

/// With NATS unreachable at start, every role starts: `/healthz` answers, `/readyz` says
/// NATS is not ready, the planner writes runs; once NATS is up the runs go out, with no
/// restart.
#[test]
fn serve_starts_without_nats_and_publishes_once_it_is_up() {
    let mut nats = kairos_testkit::NatsServer::start();
    nats.stop();
    let mut served = Served::launch("api,planner,dispatcher,status", "nonats", nats);
    let ready = served.get("/readyz").expect("readyz");
    assert!(ready.contains(" 503 "), "{ready}");
    assert!(ready.contains("nats is not connected"), "{ready}");

    deploy_every_second(&served);
    let runs = served.wait_for("/schedules/every-second/runs?status=PENDING", "\"PENDING\"");
    assert!(
        !runs.contains("ENQUEUED"),
        "nothing can be published yet: {runs}"
    );

    served.nats.restart();
    served.wait_for("/readyz", " 200 ");
    served.wait_for(
        "/schedules/every-second/runs?status=ENQUEUED",
        "\"ENQUEUED\"",
    );
}

/// A second deployment on the same NATS with the same stream names but its own subjects
/// stops at start, naming the stream and the key to change; the first keeps publishing.
#[test]
fn serve_refuses_a_stream_another_deployment_owns() {
    let mut served = Served::start("api,planner,dispatcher,status", "owned");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    // The tests' server, left unmigrated: only the NATS roles run, and they stop first.
    let base = std::env::var("KAIROS_TEST_DATABASE_URL").expect("KAIROS_TEST_DATABASE_URL");
    let started = Instant::now();
    let second = Command::new(env!("CARGO_BIN_EXE_kairos"))
        .args(["serve", "--no-migrate", "--roles", "dispatcher,status"])
        .env("DATABASE_URL", &base)
        .env("KAIROS_NATS__URL", served.nats.url())
        .env("KAIROS_NATS__SUBJECT_PREFIX", "other")
        .env("KAIROS_HTTP__BIND", format!("127.0.0.1:{port}"))
        .env("KAIROS_LOG__FORMAT", "json")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run the second deployment");
    assert!(!second.status.success(), "the second deployment must stop");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "it stops at once, not after retrying"
    );
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(
        said.contains("\"KAIROS_LAUNCH\" exists with subjects [\"kairos.launch.>\"]")
            && said.contains("nats.stream_prefix"),
        "{said}"
    );

    deploy_every_second(&served);
    served.wait_for(
        "/schedules/every-second/runs?status=ENQUEUED",
        "\"ENQUEUED\"",
    );
}

/// Deploys workflow `wf` and schedule `every-second` (`* * * * * *`, overlap allow).
fn deploy_every_second(served: &Served) {
    let dag = r#"{"dag": {"nodes": [{"id": "a"}]}}"#;
    let put = served.send("PUT", "/workflows/wf/versions/1", dag);
    assert!(put.contains(" 201 ") || put.contains(" 200 "), "{put}");
    let schedule = r#"{"schedule_id": "every-second", "workflow_id": "wf", "version": 1,
        "user_id": "u", "cron_expr": "* * * * * *", "timezone": "UTC",
        "overlap_policy": "allow"}"#;
    let upsert = served.send("POST", "/schedules/upsert", schedule);
    assert!(upsert.contains(" 201 "), "{upsert}");
}
