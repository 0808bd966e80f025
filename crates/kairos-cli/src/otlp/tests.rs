//! The layer and the queue without a collector: what spans the layer makes of a request
//! span, its access line and span events, that the log filter keeps span events out (so
//! with export off nothing wants them), and that a full queue drops instead of waiting.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;

use kairos_core::trace::SPAN_TARGET;
use opentelemetry::trace::{SpanId, SpanKind, Status, TraceId};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::trace::SpanData;
use tracing::field::Empty;
use tracing::Level;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer;

use super::{Message, Queue, SpanLayer, ACCESS_TARGET};

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
const RUN_TRACE: &str = "3f0a9c4e1b7d2a6f8e5c0b9a7d6e4f3a";

fn queue(capacity: usize) -> (Queue, Receiver<Message>) {
    let (sender, receiver) = mpsc::sync_channel(capacity);
    let dropped = Arc::new(AtomicU64::new(0));
    (Queue { sender, dropped }, receiver)
}

/// The spans the layer (filtered as `serve` installs it) queues while `work` runs.
fn traced(work: impl FnOnce()) -> Vec<SpanData> {
    let (queue, receiver) = queue(64);
    let wanted = Targets::new()
        .with_target(ACCESS_TARGET, LevelFilter::INFO)
        .with_target(SPAN_TARGET, LevelFilter::INFO);
    let layer = SpanLayer::new(queue).with_filter(wanted);
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), work);
    receiver
        .try_iter()
        .filter_map(|message| match message {
            Message::Span(span) => Some(*span),
            Message::Flush(_) => None,
        })
        .collect()
}

fn attribute(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|attribute| attribute.key.as_str() == key)
        .map(|attribute| attribute.value.clone())
}

/// The API's request span and access line, as `kairos_api::access` makes them.
fn request(traceparent: Option<(&str, &str)>, status: u16, inside: impl FnOnce()) {
    let trace_id = traceparent.map_or("-", |(trace, _)| trace);
    let span = tracing::info_span!(target: ACCESS_TARGET, "request",
        request_id = "r-1", trace_id = %trace_id, parent_id = Empty);
    if let Some((_, parent)) = traceparent {
        span.record("parent_id", parent);
    }
    span.in_scope(inside);
    tracing::info!(target: ACCESS_TARGET, parent: &span, method = %"POST",
        route = "/runs/{key}/status", status, duration_ms = 1.5, caller = "e-1", "request");
}

#[test]
fn a_request_span_joins_the_callers_trace_with_its_access_line() {
    let spans = traced(|| request(Some((CALLER_TRACE, CALLER_SPAN)), 503, || {}));
    let [span] = spans.as_slice() else {
        panic!("one span: {spans:?}")
    };
    assert_eq!(span.name, "POST /runs/{key}/status");
    assert_eq!(span.span_kind, SpanKind::Server);
    let trace = TraceId::from_hex(CALLER_TRACE).expect("hex");
    assert_eq!(span.span_context.trace_id(), trace);
    assert_eq!(
        span.parent_span_id,
        SpanId::from_hex(CALLER_SPAN).expect("hex")
    );
    assert!(span.parent_span_is_remote);
    assert_eq!(attribute(span, "http.request.method"), Some("POST".into()));
    assert_eq!(
        attribute(span, "http.response.status_code"),
        Some(503.into())
    );
    assert_eq!(attribute(span, "kairos.request_id"), Some("r-1".into()));
    assert_eq!(
        attribute(span, "duration_ms"),
        None,
        "the span has its duration"
    );
    assert!(matches!(span.status, Status::Error { .. }), "a 5xx");
    assert!(span.end_time >= span.start_time);
}

#[test]
fn a_request_without_traceparent_starts_a_trace() {
    let spans = traced(|| request(None, 200, || {}));
    let [span] = spans.as_slice() else {
        panic!("one span: {spans:?}")
    };
    assert!(span.span_context.is_valid());
    assert_eq!(span.parent_span_id, SpanId::INVALID);
    assert_eq!(span.status, Status::Unset);
}

#[test]
fn span_events_become_spans_and_one_inside_a_request_links_to_it() {
    let spans = traced(|| {
        tracing::event!(name: "launch", target: SPAN_TARGET, Level::INFO,
            trace_id = RUN_TRACE, span_id = "0102030405060708",
            started_at_ns = 1_000u64, ended_at_ns = 3_000u64, otel.kind = "producer",
            otel.status_code = "error", otel.status_description = "nats down",
            kairos.run.key = "k", kairos.stream_sequence = 7u64);
        request(Some((CALLER_TRACE, CALLER_SPAN)), 200, || {
            tracing::event!(name: "status report", target: SPAN_TARGET, Level::INFO,
                trace_id = RUN_TRACE, otel.kind = "internal", kairos.run.key = "k");
        });
    });
    let [launch, report, request] = spans.as_slice() else {
        panic!("three spans: {spans:?}")
    };
    assert_eq!(launch.name, "launch");
    assert_eq!(launch.span_kind, SpanKind::Producer);
    let run_trace = TraceId::from_hex(RUN_TRACE).expect("hex");
    assert_eq!(launch.span_context.trace_id(), run_trace);
    let launch_span = SpanId::from_hex("0102030405060708").expect("hex");
    assert_eq!(launch.span_context.span_id(), launch_span);
    let elapsed = launch.end_time.duration_since(launch.start_time);
    assert_eq!(elapsed.expect("ordered").as_nanos(), 2_000);
    assert_eq!(launch.status, Status::error("nats down"));
    assert!(launch
        .attributes
        .contains(&KeyValue::new("kairos.stream_sequence", 7)));

    assert_eq!(report.name, "status report");
    assert_eq!(report.span_context.trace_id(), run_trace);
    assert_eq!(report.parent_span_id, SpanId::INVALID);
    let [link] = report.links.links.as_slice() else {
        panic!("one link: {report:?}")
    };
    assert_eq!(
        link.span_context, request.span_context,
        "to the request's span"
    );
}

#[test]
fn the_log_filter_keeps_span_events_out_whatever_the_level() {
    let filter = crate::serve::log_filter("trace").expect("filter");
    let subscriber = tracing_subscriber::registry().with(filter);
    tracing::subscriber::with_default(subscriber, || {
        assert!(!tracing::enabled!(target: SPAN_TARGET, Level::INFO));
        assert!(tracing::enabled!(target: "kairos_worker", Level::DEBUG));
    });
}

#[test]
fn a_full_queue_drops_and_counts_instead_of_waiting() {
    let (queue, receiver) = queue(1);
    let span = traced(|| request(None, 200, || {})).pop().expect("a span");
    for _ in 0..3 {
        queue.push(span.clone());
    }
    assert_eq!(queue.dropped.load(Ordering::Relaxed), 2);
    assert_eq!(receiver.try_iter().count(), 1);
}
