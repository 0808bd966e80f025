//! W3C Trace Context for runs: one trace per run, its id derived from the run's key, so
//! every instance, every message and every log line of a run name the same trace without
//! storing it.
//!
//! - The trace id is the first 32 hex digits of the key when the key is a `RunKey` (64
//!   lowercase hex digits, itself a sha256), else of sha256 of the key (a caller's key from
//!   `POST /run-launcher/start`).
//! - A span id is the first 16 hex digits of sha256 of what it names (a message id), so a
//!   message sent again under the same id carries the same span.
//! - An all-zero id is invalid in W3C Trace Context; its last digit becomes `1`.
//!
//! Spans for export (OTLP, when the binary turns it on) are described by tracing events of
//! target [`SPAN_TARGET`]; log output leaves that target out.

use sha2::{Digest, Sha256};

/// The tracing target of the events that each describe one finished span for export (a
/// launch publish, an applied status report): fields `trace_id`, `span_id`, `parent_id`,
/// `started_at_ns`, `ended_at_ns` (Unix nanoseconds), `link` (a `traceparent`),
/// `otel.kind`, `otel.status_code`, `otel.status_description`; every other field is an
/// attribute of the span, and the event's name is the span's. No log line is written for
/// them, and with export off nothing listens, so they cost one cached check.
pub const SPAN_TARGET: &str = "kairos_span";

/// The trace id of the run with idempotency key `key`: 32 lowercase hex digits.
pub fn trace_id(key: &str) -> String {
    let hex_key = key.len() == 64 && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let id = if hex_key {
        key[..32].to_string()
    } else {
        hex::encode(&Sha256::digest(key.as_bytes())[..16])
    };
    nonzero(id)
}

/// The span id for `name`: 16 lowercase hex digits.
pub fn span_id(name: &str) -> String {
    nonzero(hex::encode(&Sha256::digest(name.as_bytes())[..8]))
}

/// `00-<trace id of key>-<span id of span>-01`: a sampled span of the run's trace.
pub fn traceparent(key: &str, span: &str) -> String {
    format!("00-{}-{}-01", trace_id(key), span_id(span))
}

/// The trace id a `traceparent` value names, when it is a valid version-00 value.
pub fn trace_id_of(traceparent: &str) -> Option<&str> {
    ids_of(traceparent).map(|(trace, _span)| trace)
}

/// The trace id and the span id (the caller's span: the parent of what it asks for) a
/// `traceparent` value names, when it is a valid version-00 value.
pub fn ids_of(traceparent: &str) -> Option<(&str, &str)> {
    let mut parts = traceparent.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| {
        s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let valid = parts.next().is_none()
        && version == "00"
        && hex(trace, 32)
        && hex(span, 16)
        && hex(flags, 2)
        && trace.bytes().any(|b| b != b'0')
        && span.bytes().any(|b| b != b'0');
    valid.then_some((trace, span))
}

fn nonzero(mut id: String) -> String {
    if id.bytes().all(|b| b == b'0') {
        id.pop();
        id.push('1');
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_key_gives_its_first_half_as_trace_id() {
        let key = "3f0a9c4e1b7d2a6f8e5c0b9a7d6e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e";
        assert_eq!(trace_id(key), "3f0a9c4e1b7d2a6f8e5c0b9a7d6e4f3a");
        let parent = traceparent(key, "msg-1");
        assert_eq!(
            trace_id_of(&parent),
            Some("3f0a9c4e1b7d2a6f8e5c0b9a7d6e4f3a")
        );
        assert_eq!(parent.len(), 55);
        assert_eq!(parent, traceparent(key, "msg-1"), "deterministic");
        assert_ne!(parent, traceparent(key, "msg-2"), "a span per message");
    }

    #[test]
    fn other_keys_are_hashed_and_zero_ids_are_avoided() {
        let id = trace_id("order-42");
        assert_eq!(id.len(), 32);
        assert_ne!(id, "order-42");
        assert_eq!(trace_id(&"0".repeat(64)), format!("{}1", "0".repeat(31)));
    }

    #[test]
    fn only_valid_traceparents_name_a_trace() {
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        assert_eq!(
            trace_id_of(&format!("00-{trace}-00f067aa0ba902b7-01")),
            Some(trace)
        );
        assert_eq!(
            ids_of(&format!("00-{trace}-00f067aa0ba902b7-01")),
            Some((trace, "00f067aa0ba902b7"))
        );
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
        ] {
            assert_eq!(trace_id_of(bad), None, "{bad}");
        }
    }
}
