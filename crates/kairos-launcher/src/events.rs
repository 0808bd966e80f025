//! CloudEvents and trace context on every message kairos publishes, in the binary content
//! mode of the CloudEvents NATS protocol binding: each attribute is a header `ce-<name>`,
//! and the body is the message's JSON as before (an executor that ignores headers reads
//! what it always read).
//!
//! | header | launch | dead letter | cancel |
//! |---|---|---|---|
//! | `ce-specversion` | `1.0` | `1.0` | `1.0` |
//! | `ce-id` | the `Nats-Msg-Id` | the `Nats-Msg-Id` | the `Nats-Msg-Id` |
//! | `ce-source` | `/kairos/<subject_prefix>/schedules/<schedule_id>` | the same | the same |
//! | `ce-type` | [`LAUNCH`] | [`DEAD_LETTER`] | [`CANCEL`] |
//! | `ce-time` | the tick (`scheduled_for`) | the tick | when the cancel was asked for |
//! | `ce-subject` | the run's key | the run's key | the run's key |
//! | `ce-datacontenttype` | `application/json` | the same | the same |
//! | `traceparent` | the run's trace ([`kairos_core::trace`]), a span per message id | the same | the same |

use async_nats::HeaderMap;

/// `ce-type` of a launch message.
pub const LAUNCH: &str = "dev.kairos.run.launch";
/// `ce-type` of a dead letter.
pub const DEAD_LETTER: &str = "dev.kairos.run.dead_letter";
/// `ce-type` of a cancel request.
pub const CANCEL: &str = "dev.kairos.run.cancel";

/// The CloudEvents attributes of one message that are not the same for all.
#[derive(Debug, Clone)]
pub(crate) struct Event<'a> {
    /// `ce-type`.
    pub kind: &'static str,
    /// The run's schedule (`ce-source`).
    pub schedule_id: &'a str,
    /// The run's key (`ce-subject`, and the trace).
    pub key: &'a str,
    /// `ce-time`, RFC 3339.
    pub time: &'a str,
}

impl Event<'_> {
    /// The headers of this event sent as message `msg_id` under `subject_prefix`, with
    /// `Nats-Msg-Id` set to `msg_id`.
    pub(crate) fn headers(&self, subject_prefix: &str, msg_id: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", msg_id);
        headers.insert("ce-specversion", "1.0");
        headers.insert("ce-id", msg_id);
        let source = format!("/kairos/{subject_prefix}/schedules/{}", self.schedule_id);
        headers.insert("ce-source", source.as_str());
        headers.insert("ce-type", self.kind);
        headers.insert("ce-time", self.time);
        headers.insert("ce-subject", self.key);
        headers.insert("ce-datacontenttype", "application/json");
        let traceparent = kairos_core::trace::traceparent(self.key, msg_id);
        headers.insert("traceparent", traceparent.as_str());
        headers
    }
}
