//! One span per launch publish, for export: an event of target
//! [`kairos_core::trace::SPAN_TARGET`] named `launch`, in the run's trace, whose span id is
//! the one the message's `traceparent` names, so an executor's spans (children of that
//! header) nest under it. Nothing is measured or built unless a subscriber wants the target
//! (with export off, one cached check per batch).

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use kairos_core::trace::{self, SPAN_TARGET};
use tracing::Level;

use crate::{Enqueued, LaunchMessage, Result};

/// When a batch of launch publishes started; `None` when no span is wanted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Publishing {
    started_at: SystemTime,
    started: Instant,
}

impl Publishing {
    /// Starts timing a batch, if its spans are wanted.
    pub(crate) fn start() -> Option<Publishing> {
        tracing::enabled!(target: SPAN_TARGET, Level::INFO).then(|| Publishing {
            started_at: SystemTime::now(),
            started: Instant::now(),
        })
    }

    /// One `launch` span per message, from the batch's start to the message's
    /// acknowledgement (or to now, for a message that failed).
    pub(crate) fn finished<'a>(
        self,
        messages: impl Iterator<Item = (&'a LaunchMessage, &'a str)>,
        outcomes: &[Result<Enqueued>],
        subject_prefix: &str,
    ) {
        let started_at_ns = unix_ns(self.started_at);
        for ((message, msg_id), outcome) in messages.zip(outcomes) {
            let key = message.idempotency_key.as_str();
            let ended_at = match outcome {
                Ok(enqueued) => self.started_at + enqueued.acked_at.duration_since(self.started),
                Err(_) => SystemTime::now(),
            };
            let error = outcome.as_ref().err().map(ToString::to_string);
            let subject = message.subject(subject_prefix);
            tracing::event!(
                name: "launch",
                target: SPAN_TARGET,
                Level::INFO,
                trace_id = %trace::trace_id(key),
                span_id = %trace::span_id(msg_id),
                started_at_ns = started_at_ns,
                ended_at_ns = unix_ns(ended_at),
                otel.kind = "producer",
                otel.status_code = if error.is_some() { "error" } else { "unset" },
                otel.status_description = error.as_deref(),
                kairos.run.key = key,
                kairos.run.attempt = message.attempt,
                kairos.schedule_id = message.schedule_id.as_str(),
                messaging.system = "nats",
                messaging.operation.type = "send",
                messaging.destination.name = subject.as_str(),
                messaging.message.id = msg_id,
                kairos.stream_sequence = outcome.as_ref().ok().map(|e| e.stream_sequence),
                kairos.duplicate = outcome.as_ref().ok().map(|e| e.duplicate),
            );
        }
    }
}

/// Nanoseconds since the Unix epoch (0 before it).
fn unix_ns(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    })
}
