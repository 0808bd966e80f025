//! The tracing layer that turns kairos's traced work into finished OTLP spans:
//!
//! - the API's `request` span (`kairos_api::access`): a server span named `<METHOD>
//!   <route>`, in the caller's trace and under the caller's span when it sent a
//!   `traceparent` (the span's `trace_id` and `parent_id` fields), with the attributes of
//!   its access line;
//! - every event of target [`SPAN_TARGET`]: a span as the event describes it (its fields,
//!   see `kairos_core::trace`). One with neither `parent_id` nor `link` inside a request
//!   (a status report over HTTP) is linked to the request's span.
//!
//! Install it with a filter that lets only those through (see `serve::init_tracing`).

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kairos_core::trace::{self, SPAN_TARGET};
use opentelemetry::trace::{
    Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SpanData, SpanEvents, SpanLinks};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use super::Queue;

/// The target of the API's request span and access line.
pub const ACCESS_TARGET: &str = "kairos_api::access";

/// Turns request spans and span events into OTLP spans, handed to the export queue.
#[derive(Debug)]
pub struct SpanLayer {
    queue: Queue,
    scope: InstrumentationScope,
    ids: RandomIdGenerator,
}

impl SpanLayer {
    pub(super) fn new(queue: Queue) -> SpanLayer {
        SpanLayer {
            queue,
            scope: InstrumentationScope::builder("kairos")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
            ids: RandomIdGenerator::default(),
        }
    }

    /// The finished span `fields` describe.
    fn span_data(&self, name: String, kind: SpanKind, fields: Fields) -> SpanData {
        let trace_id = fields
            .trace_id
            .as_deref()
            .and_then(|hex| TraceId::from_hex(hex).ok())
            .filter(|id| *id != TraceId::INVALID)
            .unwrap_or_else(|| self.ids.new_trace_id());
        let span_id = fields
            .span_id
            .as_deref()
            .and_then(|hex| SpanId::from_hex(hex).ok())
            .filter(|id| *id != SpanId::INVALID)
            .unwrap_or_else(|| self.ids.new_span_id());
        let parent = fields
            .parent_id
            .as_deref()
            .and_then(|hex| SpanId::from_hex(hex).ok());
        let mut links = SpanLinks::default();
        links.links.extend(fields.link);
        let ended_at = fields.ended_at.unwrap_or_else(SystemTime::now);
        let status = match fields.error {
            Some(description) => Status::error(description),
            None => Status::Unset,
        };
        SpanData {
            span_context: SpanContext::new(
                trace_id,
                span_id,
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: parent.unwrap_or(SpanId::INVALID),
            parent_span_is_remote: parent.is_some(),
            span_kind: fields.kind.unwrap_or(kind),
            name: Cow::Owned(name),
            start_time: fields.started_at.unwrap_or(ended_at),
            end_time: ended_at,
            attributes: fields.attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links,
            status,
            instrumentation_scope: self.scope.clone(),
        }
    }
}

/// A request span while it is open.
#[derive(Debug)]
struct Open {
    fields: Fields,
    method: Option<String>,
    route: Option<String>,
}

impl<S> Layer<S> for SpanLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if !is_request(span.metadata()) {
            return;
        }
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        fields.started_at = Some(SystemTime::now());
        // Ids are fixed now, so that the spans inside can link to this one.
        fields.span_id = Some(self.ids.new_span_id().to_string());
        if fields.trace_id.as_deref().and_then(trace_id_hex).is_none() {
            fields.trace_id = Some(self.ids.new_trace_id().to_string());
        }
        let open = Open {
            fields,
            method: None,
            route: None,
        };
        span.extensions_mut().insert(open);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(open) = extensions.get_mut::<Open>() {
            values.record(&mut open.fields);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let metadata = event.metadata();
        if metadata.target() == ACCESS_TARGET {
            // The access line: its method, route and status go on the request's span.
            let Some(span) = ctx.event_span(event) else {
                return;
            };
            let mut extensions = span.extensions_mut();
            let Some(open) = extensions.get_mut::<Open>() else {
                return;
            };
            let mut access = Fields::default();
            event.record(&mut access);
            open.absorb_access(access);
            return;
        }
        if metadata.target() != SPAN_TARGET {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.parent_id.is_none() && fields.link.is_none() {
            fields.link = ctx.event_span(event).and_then(|span| {
                let extensions = span.extensions();
                extensions.get::<Open>().and_then(|open| open.link())
            });
        }
        let span = self.span_data(metadata.name().to_string(), SpanKind::Internal, fields);
        self.queue.push(span);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(open) = span.extensions_mut().remove::<Open>() else {
            return;
        };
        let name = match (&open.method, &open.route) {
            (Some(method), Some(route)) => format!("{method} {route}"),
            (Some(method), None) => method.clone(),
            _ => "request".to_string(),
        };
        let span = self.span_data(name, SpanKind::Server, open.fields);
        self.queue.push(span);
    }
}

impl Open {
    /// Takes the access line's fields as the span's attributes (semantic-convention names).
    fn absorb_access(&mut self, access: Fields) {
        for attribute in access.attributes {
            let key = match attribute.key.as_str() {
                "method" => {
                    self.method = Some(attribute.value.as_str().into_owned());
                    "http.request.method"
                }
                "route" => {
                    self.route = Some(attribute.value.as_str().into_owned());
                    "http.route"
                }
                "status" => {
                    if let Value::I64(code @ 500..) = attribute.value {
                        self.fields.error = Some(format!("HTTP {code}"));
                    }
                    "http.response.status_code"
                }
                "caller" => "kairos.caller",
                _ => continue,
            };
            self.fields
                .attributes
                .push(KeyValue::new(key, attribute.value));
        }
    }

    /// A link to this request's span.
    fn link(&self) -> Option<Link> {
        let trace_id = TraceId::from_hex(self.fields.trace_id.as_deref()?).ok()?;
        let span_id = SpanId::from_hex(self.fields.span_id.as_deref()?).ok()?;
        let context = SpanContext::new(
            trace_id,
            span_id,
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        );
        Some(Link::with_context(context))
    }
}

/// The API's request span.
fn is_request(metadata: &tracing::Metadata<'_>) -> bool {
    metadata.target() == ACCESS_TARGET && metadata.name() == "request"
}

/// `hex` when it is a valid trace id.
fn trace_id_hex(hex: &str) -> Option<&str> {
    let valid = hex.len() == 32 && TraceId::from_hex(hex).is_ok_and(|id| id != TraceId::INVALID);
    valid.then_some(hex)
}

/// What the fields of a span event (or of a request span) say.
#[derive(Debug, Default)]
struct Fields {
    trace_id: Option<String>,
    span_id: Option<String>,
    parent_id: Option<String>,
    link: Option<Link>,
    started_at: Option<SystemTime>,
    ended_at: Option<SystemTime>,
    kind: Option<SpanKind>,
    error: Option<String>,
    attributes: Vec<KeyValue>,
}

impl Fields {
    fn text(&mut self, field: &Field, text: String) {
        match field.name() {
            "trace_id" => self.trace_id = Some(text),
            "span_id" => self.span_id = Some(text),
            "parent_id" => self.parent_id = Some(text),
            "link" => self.link = link_to(&text),
            "otel.kind" => self.kind = kind(&text),
            "otel.status_code" => {
                if text == "error" && self.error.is_none() {
                    self.error = Some(String::new());
                }
            }
            "otel.status_description" => self.error = Some(text),
            "request_id" => self
                .attributes
                .push(KeyValue::new("kairos.request_id", text)),
            name => self.attributes.push(KeyValue::new(name, text)),
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.text(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.text(field, format!("{value:?}"));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "started_at_ns" => self.started_at = Some(at_unix_ns(value)),
            "ended_at_ns" => self.ended_at = Some(at_unix_ns(value)),
            name => {
                let value =
                    i64::try_from(value).map_or_else(|_| value.to_string().into(), Value::I64);
                self.attributes.push(KeyValue::new(name, value));
            }
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.attributes.push(KeyValue::new(field.name(), value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.attributes.push(KeyValue::new(field.name(), value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.attributes.push(KeyValue::new(field.name(), value));
    }
}

/// A link to the span a `traceparent` names.
fn link_to(traceparent: &str) -> Option<Link> {
    let (trace_id, span_id) = trace::ids_of(traceparent)?;
    let context = SpanContext::new(
        TraceId::from_hex(trace_id).ok()?,
        SpanId::from_hex(span_id).ok()?,
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    Some(Link::with_context(context))
}

fn kind(name: &str) -> Option<SpanKind> {
    Some(match name {
        "producer" => SpanKind::Producer,
        "consumer" => SpanKind::Consumer,
        "server" => SpanKind::Server,
        "client" => SpanKind::Client,
        "internal" => SpanKind::Internal,
        _ => return None,
    })
}

fn at_unix_ns(nanos: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(nanos)
}
