//! `kairos serve`'s log as a log shipper reads it: with stdout in a file, the default
//! format writes one JSON object per line and no colour codes; `log.format = "pretty"` in a
//! file has no colour codes either. Every request gets an id (the caller's `X-Request-Id`
//! or a new one), echoed on the answer, written into problem bodies and into the request's
//! one access line, and the log names the database it connected to, without its password.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::Served;

/// `GET path` with `headers`; the whole answer.
fn get(port: u16, path: &str, headers: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: localhost\r\n{headers}\r\n"
    )
    .expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    answer
}

/// The value of header `name` in an HTTP answer.
fn header<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
    answer.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// The log's lines once `check` holds for them (at most 10 s).
fn lines_when(log: &std::path::Path, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(log).expect("read the log");
        if check(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "log never matched:\n{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_log_in_a_file_is_json_lines_with_request_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("serve.log");
    let file = std::fs::File::create(&path).expect("log file");
    let served = Served::start_logging("api,planner", "logs_json", &file, &[]);

    let kept = get(
        served.port,
        "/schedules",
        "X-Request-Id: deploy-42\r\ntraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n",
    );
    assert!(kept.contains(" 200 "), "{kept}");
    assert_eq!(header(&kept, "x-request-id"), Some("deploy-42"));
    let refused = get(
        served.port,
        "/schedules/no%20such",
        "X-Request-Id: bad id\r\n",
    );
    let id = header(&refused, "x-request-id")
        .expect("an id on a refusal")
        .to_string();
    assert_eq!(id.len(), 32, "a new id replaces one with a space: {id}");
    let body: Value =
        serde_json::from_str(refused.split("\r\n\r\n").nth(1).expect("body")).expect("json");
    assert_eq!(body["request_id"], Value::from(id.clone()), "{body}");
    let fresh = get(served.port, "/healthz", "");
    let other = header(&fresh, "x-request-id").expect("an id when none was sent");
    assert_ne!(other, id);

    let text = lines_when(&path, |text| {
        text.contains(&id) && text.contains("deploy-42")
    });
    assert!(!text.contains('\u{1b}'), "colour codes in a file:\n{text}");
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect();
    let access = lines
        .iter()
        .find(|line| line["message"] == "request" && line["span"]["request_id"] == "deploy-42")
        .expect("the access line of deploy-42");
    assert_eq!(access["method"], "GET");
    assert_eq!(
        access["span"]["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736",
        "the caller's trace"
    );
    assert_eq!(access["route"], "/schedules");
    assert_eq!(access["status"], 200);
    assert!(access["duration_ms"].as_f64().is_some(), "{access}");
    assert!(lines.iter().any(|line| line["message"] == "request"
        && line["span"]["request_id"] == id.as_str()
        && line["status"] == 400));
    let connected = lines
        .iter()
        .find(|line| line["message"] == "connected to PostgreSQL")
        .expect("the database it connected to");
    let database = connected["database"].as_str().expect("database");
    assert!(database.contains("kairos_logs_json_test_"), "{database}");
}

#[test]
fn pretty_lines_in_a_file_carry_no_colour() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("serve.log");
    let file = std::fs::File::create(&path).expect("log file");
    let served = Served::start_logging(
        "api",
        "logs_pretty",
        &file,
        &[("KAIROS_LOG__FORMAT", "pretty")],
    );
    let answer = get(served.port, "/healthz", "X-Request-Id: pretty-1\r\n");
    assert!(answer.contains(" 200 "), "{answer}");
    let text = lines_when(&path, |text| text.contains("pretty-1"));
    assert!(!text.contains('\u{1b}'), "colour codes in a file:\n{text}");
    assert!(text.lines().all(|line| !line.starts_with('{')), "{text}");
}

/// A run's log lines carry its trace id: the trace its launch message names in
/// `traceparent` (the first 32 hex digits of the run's key). A status report sent with a
/// `traceparent` header is logged with the trace it names beside the run's.
#[test]
fn a_runs_log_lines_carry_its_trace_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("serve.log");
    let file = std::fs::File::create(&path).expect("log file");
    let level = [("KAIROS_LOG__LEVEL", "kairos_worker=debug,info")];
    let roles = "api,planner,dispatcher,status";
    let served = Served::start_logging(roles, "logs_trace", &file, &level);
    let dag = r#"{"dag": {"nodes": [{"id": "a"}]}}"#;
    let put = served.send("PUT", "/workflows/wf/versions/1", dag);
    assert!(put.contains(" 201 "), "{put}");
    let schedule = r#"{"schedule_id": "traced", "workflow_id": "wf", "version": 1,
        "user_id": "u", "cron_expr": "0 0 1 1 *", "timezone": "UTC"}"#;
    let upsert = served.send("POST", "/schedules/upsert", schedule);
    assert!(upsert.contains(" 201 "), "{upsert}");
    let trigger = served.send(
        "POST",
        "/schedules/traced/trigger",
        r#"{"request_id": "t-1"}"#,
    );
    assert!(trigger.contains(" 201 "), "{trigger}");
    let body = trigger.split("\r\n\r\n").nth(1).expect("a body");
    let run: Value = serde_json::from_str(body).expect("run JSON");
    let key = run["idempotency_key"].as_str().expect("key").to_string();

    let text = lines_when(&path, |text| {
        text.contains(&key) && text.contains("run emitted")
    });
    let emitted: Value = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["key"] == key.as_str() && line["message"] == "run emitted")
        .expect("the run's launch line");
    assert_eq!(emitted["trace_id"], &key[..32], "{emitted}");

    // The executor reports STARTED in its own span of the run's trace.
    let parent = format!("00-{}-00f067aa0ba902b7-01", &key[..32]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let client = async_nats::connect(served.nats.url()).await.expect("nats");
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("traceparent", parent.as_str());
        let body = serde_json::json!({"idempotency_key": key, "status": "STARTED",
            "executor_id": "e-1"});
        let subject = format!("kairos.status.{key}");
        let jetstream = async_nats::jetstream::new(client);
        let payload = body.to_string().into();
        let ack = jetstream.publish_with_headers(subject, headers, payload);
        ack.await.expect("publish").await.expect("stored");
    });
    let text = lines_when(&path, |text| text.contains("run status recorded"));
    let recorded: Value = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["key"] == key.as_str() && line["message"] == "run status recorded")
        .expect("the report's line");
    assert_eq!(recorded["trace_id"], &key[..32], "{recorded}");
    assert_eq!(recorded["report_trace_id"], &key[..32], "{recorded}");
}
