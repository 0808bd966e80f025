//! `[otlp]` span export from a real `kairos serve` (real PostgreSQL, real nats-server) to
//! an OTLP/HTTP receiver inside the test that decodes the protobuf bodies: the API request
//! span joins the caller's trace under the caller's span, the launch span is the span the
//! launch message's `traceparent` names, and applied status reports are spans of the run's
//! trace. A collector that is not there stops nothing, and is logged once.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::Value;
use support::Served;

/// The caller's trace and span, as its `traceparent` names them.
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// One exported span with its resource's `service.name`.
#[derive(Debug, Clone)]
struct Received {
    service: String,
    span: Span,
}

/// An OTLP/HTTP receiver on a free loopback port, keeping every span posted to
/// `/v1/traces`.
struct Receiver {
    url: String,
    spans: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the receiver");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = spans.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let kept = kept.clone();
                let service = hyper::service::service_fn(move |request| {
                    let kept = kept.clone();
                    async move { Ok::<_, hyper::Error>(take(request, &kept).await) }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service),
                );
            }
        });
        Receiver { url, spans }
    }

    /// The spans received so far.
    fn spans(&self) -> Vec<Received> {
        self.spans.lock().expect("spans").clone()
    }

    /// Waits (at most 30 s) until a span satisfies `check`; that span.
    fn wait_for(&self, what: &str, check: impl Fn(&Received) -> bool) -> Received {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(found) = self.spans().into_iter().find(|span| check(span)) {
                return found;
            }
            if Instant::now() > deadline {
                let names: Vec<String> = self.spans().iter().map(describe).collect();
                panic!(
                    "no {what} exported within 30 s; received:\n{}",
                    names.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Keeps the spans of a `POST /v1/traces` body; answers an empty (valid) response.
async fn take(request: Request<Incoming>, kept: &Mutex<Vec<Received>>) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_string();
    let content_type = request
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = request
        .into_body()
        .collect()
        .await
        .map(|body| body.to_bytes())
        .unwrap_or_default();
    assert_eq!(path, "/v1/traces", "spans go to <endpoint>/v1/traces");
    assert_eq!(content_type, "application/x-protobuf");
    let export = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf body");
    let mut kept = kept.lock().expect("spans");
    for resource_spans in export.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|resource| &resource.attributes)
            .find(|attribute| attribute.key == "service.name")
            .and_then(|attribute| text(attribute.value.as_ref()?.value.as_ref()?))
            .unwrap_or_default();
        for scope_spans in resource_spans.scope_spans {
            for span in scope_spans.spans {
                let service = service.clone();
                kept.push(Received { service, span });
            }
        }
    }
    Response::builder()
        .header("content-type", "application/x-protobuf")
        .body(Full::new(Bytes::new()))
        .expect("response")
}

fn text(value: &AnyValue) -> Option<String> {
    match value {
        AnyValue::StringValue(text) => Some(text.clone()),
        AnyValue::IntValue(n) => Some(n.to_string()),
        AnyValue::BoolValue(b) => Some(b.to_string()),
        AnyValue::DoubleValue(x) => Some(x.to_string()),
        _ => None,
    }
}

/// The value of attribute `key` of `span`, as text.
fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|attribute| attribute.key == key)
        .and_then(|attribute| text(attribute.value.as_ref()?.value.as_ref()?))
}

fn describe(received: &Received) -> String {
    let span = &received.span;
    format!(
        "{} trace={} span={} parent={} {:?}",
        span.name,
        hex(&span.trace_id),
        hex(&span.span_id),
        hex(&span.parent_span_id),
        span.attributes
            .iter()
            .map(|a| format!(
                "{}={:?}",
                a.key,
                a.value.as_ref().and_then(|v| v.value.as_ref())
            ))
            .collect::<Vec<_>>()
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `method path` with `headers` and a JSON `body`; the whole answer.
fn request(port: u16, method: &str, path: &str, headers: &str, body: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n{headers}\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    answer
}

/// Deploys workflow `wf` version 1 with schedule `every-second` (`* * * * * *`), in the
/// caller's trace; the answer.
fn deploy_every_second(served: &Served) -> String {
    let body = r#"{"dag": {"nodes": [{"id": "a"}]}, "schedules": [{"schedule_id": "every-second",
        "user_id": "u", "cron_expr": "* * * * * *", "timezone": "UTC"}]}"#;
    let headers =
        format!("X-Request-Id: deploy-otlp\r\ntraceparent: 00-{CALLER_TRACE}-{CALLER_SPAN}-01\r\n");
    let answer = request(
        served.port,
        "PUT",
        "/workflows/wf/versions/1",
        &headers,
        body,
    );
    assert!(
        answer.contains(" 201 ") || answer.contains(" 200 "),
        "{answer}"
    );
    answer
}

/// The first launch message of the stream (waiting for it at most 30 s): its key and the
/// trace and span ids of its `traceparent`.
async fn first_launch(client: &async_nats::Client) -> (String, String, String) {
    let jetstream = async_nats::jetstream::new(client.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    let message = loop {
        if let Ok(stream) = jetstream.get_stream("KAIROS_LAUNCH").await {
            if let Ok(message) = stream.get_raw_message(1).await {
                break message;
            }
        }
        assert!(Instant::now() < deadline, "no launch within 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let body: Value = serde_json::from_slice(&message.payload).expect("launch JSON");
    let key = body["idempotency_key"].as_str().expect("key").to_string();
    let traceparent = message
        .headers
        .get("traceparent")
        .expect("a traceparent header")
        .to_string();
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{traceparent}");
    (key, parts[1].to_string(), parts[2].to_string())
}

/// Publishes a status report about `key` on NATS, with `traceparent` when given.
async fn report(client: &async_nats::Client, key: &str, status: &str, traceparent: Option<&str>) {
    let mut headers = async_nats::HeaderMap::new();
    if let Some(traceparent) = traceparent {
        headers.insert("traceparent", traceparent);
    }
    let body = serde_json::json!({"idempotency_key": key, "status": status,
        "executor_id": "e-1"});
    let jetstream = async_nats::jetstream::new(client.clone());
    let ack = jetstream.publish_with_headers(
        format!("kairos.status.{key}"),
        headers,
        body.to_string().into(),
    );
    ack.await.expect("publish").await.expect("stored");
}

#[test]
fn spans_of_a_request_a_launch_and_its_reports_are_exported_and_join() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let receiver = runtime.block_on(Receiver::start());
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("serve.log");
    let file = std::fs::File::create(&log).expect("log file");
    let envs = [
        ("KAIROS_OTLP__ENDPOINT", receiver.url.as_str()),
        ("KAIROS_OTLP__SERVICE_NAME", "kairos-otlp-test"),
        ("KAIROS_LOG__FORMAT", "json"),
    ];
    let served = Served::start_logging("api,planner,dispatcher,status", "otlp", &file, &envs);
    deploy_every_second(&served);

    // 1. The request span: the caller's trace, under the caller's span.
    let deploy = receiver.wait_for("request span of the deploy", |received| {
        attribute(&received.span, "kairos.request_id").as_deref() == Some("deploy-otlp")
    });
    let span = &deploy.span;
    assert_eq!(deploy.service, "kairos-otlp-test");
    assert_eq!(
        span.name,
        "PUT /workflows/{id}/versions/{version}",
        "{}",
        describe(&deploy)
    );
    assert_eq!(span.kind, SpanKind::Server as i32);
    assert_eq!(hex(&span.trace_id), CALLER_TRACE);
    assert_eq!(hex(&span.parent_span_id), CALLER_SPAN);
    assert_eq!(
        attribute(span, "http.request.method").as_deref(),
        Some("PUT")
    );
    let status = attribute(span, "http.response.status_code").expect("status");
    assert!(status == "201" || status == "200", "{}", describe(&deploy));

    // 2. The launch span is the one the message's traceparent names.
    let client = runtime
        .block_on(async_nats::connect(served.nats.url()))
        .expect("nats");
    let (key, trace_id, span_id) = runtime.block_on(first_launch(&client));
    assert_eq!(trace_id, &key[..32], "the run's trace");
    let launch = receiver.wait_for("launch span", |received| {
        received.span.name == "launch" && hex(&received.span.span_id) == span_id
    });
    let span = &launch.span;
    assert_eq!(hex(&span.trace_id), trace_id, "{}", describe(&launch));
    assert_eq!(span.kind, SpanKind::Producer as i32);
    assert!(
        span.parent_span_id.is_empty(),
        "the root of the run's trace"
    );
    assert_eq!(
        attribute(span, "kairos.run.key").as_deref(),
        Some(key.as_str())
    );
    assert_eq!(attribute(span, "messaging.system").as_deref(), Some("nats"));
    assert!(attribute(span, "messaging.message.id").is_some());
    assert!(span.end_time_unix_nano >= span.start_time_unix_nano);

    // 3. Status reports: STARTED from the executor's span (a child of the launch span) is
    // its child; SUCCESS sent from another trace links to it.
    let executor_span = "1111222233334444";
    let started = format!("00-{trace_id}-{executor_span}-01");
    let elsewhere = "aaaabbbbccccddddeeeeffff00001111";
    let success = format!("00-{elsewhere}-5555666677778888-01");
    runtime.block_on(report(&client, &key, "STARTED", Some(&started)));
    runtime.block_on(report(&client, &key, "SUCCESS", Some(&success)));
    let report_span = |status: &'static str| {
        let key = key.clone();
        move |received: &Received| {
            received.span.name == "status report"
                && attribute(&received.span, "kairos.run.key").as_deref() == Some(key.as_str())
                && attribute(&received.span, "kairos.report.status").as_deref() == Some(status)
        }
    };
    let started_span = receiver.wait_for("STARTED report span", report_span("STARTED"));
    let span = &started_span.span;
    assert_eq!(hex(&span.trace_id), trace_id, "{}", describe(&started_span));
    assert_eq!(hex(&span.parent_span_id), executor_span);
    assert_eq!(
        attribute(span, "kairos.run.status").as_deref(),
        Some("STARTED")
    );
    assert_eq!(
        attribute(span, "kairos.report.trace_id").as_deref(),
        Some(trace_id.as_str())
    );
    let success_span = receiver.wait_for("SUCCESS report span", report_span("SUCCESS"));
    let span = &success_span.span;
    assert_eq!(hex(&span.trace_id), trace_id, "{}", describe(&success_span));
    assert!(span.parent_span_id.is_empty());
    assert_eq!(
        attribute(span, "kairos.run.status").as_deref(),
        Some("SUCCESS")
    );
    assert_eq!(
        attribute(span, "kairos.report.trace_id").as_deref(),
        Some(elsewhere)
    );
    let link = span.links.first().expect("a link to the report's span");
    assert_eq!(hex(&link.trace_id), elsewhere);
    assert_eq!(hex(&link.span_id), "5555666677778888");

    // The span events never reach the log.
    let text = std::fs::read_to_string(&log).expect("read the log");
    assert!(!text.contains("\"target\":\"kairos_span\""), "{text}");
    assert!(!text.contains("OTLP export failed"), "{text}");
}

#[test]
fn an_unreachable_collector_stops_nothing_and_is_logged_once() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port");
    let endpoint = format!("http://{closed}");
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("serve.log");
    let file = std::fs::File::create(&log).expect("log file");
    let envs = [
        ("KAIROS_OTLP__ENDPOINT", endpoint.as_str()),
        ("KAIROS_OTLP__TIMEOUT_MS", "500"),
        ("KAIROS_LOG__FORMAT", "json"),
    ];
    let roles = "api,planner,dispatcher,status";
    let mut served = Served::start_logging(roles, "otlp_down", &file, &envs);
    assert!(served.get("/healthz").unwrap_or_default().contains(" 200 "));
    deploy_every_second(&served);
    served.wait_for(
        "/schedules/every-second/runs?status=ENQUEUED",
        "\"ENQUEUED\"",
    );

    // Batches keep failing (a request span and a launch every second), one line says so.
    let deadline = Instant::now() + Duration::from_secs(20);
    let failed = |text: &str| text.matches("OTLP export failed").count();
    while failed(&std::fs::read_to_string(&log).expect("read the log")) == 0 {
        assert!(Instant::now() < deadline, "the failure is never logged");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(4));
    assert!(served.get("/healthz").unwrap_or_default().contains(" 200 "));
    let runs = served.wait_for("/schedules/every-second/runs", "\"ENQUEUED\"");
    assert!(runs.contains("idempotency_key"), "{runs}");
    let text = std::fs::read_to_string(&log).expect("read the log");
    assert_eq!(failed(&text), 1, "logged once, not per batch:\n{text}");
    assert!(
        served.child.try_wait().expect("wait").is_none(),
        "serve still runs"
    );
}
