//! One span per applied status report, for export: an event of target
//! [`kairos_core::trace::SPAN_TARGET`] named `status report`, in the run's trace. A report
//! sent with a `traceparent` of the run's trace (an executor continuing the launch
//! message's) is its parent; one of another trace is linked. A report over HTTP has no
//! traceparent here: the exporting layer links it to the request's span instead. Nothing
//! is measured or built unless a subscriber wants the target.

use std::time::{SystemTime, UNIX_EPOCH};

use super::report::Applied;
use kairos_core::trace::{self, SPAN_TARGET};
use kairos_core::Reported;
use tracing::Level;

/// When a batch of reports was handed to the applier; `None` when no span is wanted.
#[derive(Debug, Clone, Copy)]
pub(super) struct Applying {
    started_at_ns: u64,
}

/// One report of a batch, as its span needs it.
#[derive(Debug)]
pub(super) struct Report<'a> {
    pub key: &'a str,
    pub reported: Reported,
    /// The report's `traceparent`, when it came with one.
    pub traceparent: Option<&'a str>,
    /// `nats` or `http`.
    pub channel: &'static str,
}

impl Applying {
    /// Starts timing a batch, if its spans are wanted.
    pub(super) fn start() -> Option<Applying> {
        tracing::enabled!(target: SPAN_TARGET, Level::INFO).then(|| Applying {
            started_at_ns: unix_ns(SystemTime::now()),
        })
    }

    /// A `status report` span for `report` when it moved its run (a report that changed
    /// nothing or was refused has none).
    pub(super) fn applied(self, report: &Report<'_>, applied: &Applied) {
        let Applied::Moved(run) = applied else {
            return;
        };
        let run_trace = trace::trace_id(report.key);
        let reported_ids = report.traceparent.and_then(trace::ids_of);
        let parent_id = reported_ids
            .filter(|(trace, _)| *trace == run_trace)
            .map(|(_, span)| span);
        let link = report
            .traceparent
            .filter(|_| parent_id.is_none() && reported_ids.is_some());
        let kind = if report.channel == "nats" {
            "consumer"
        } else {
            "internal"
        };
        tracing::event!(
            name: "status report",
            target: SPAN_TARGET,
            Level::INFO,
            trace_id = %run_trace,
            parent_id,
            link,
            started_at_ns = self.started_at_ns,
            ended_at_ns = unix_ns(SystemTime::now()),
            otel.kind = kind,
            kairos.run.key = report.key,
            kairos.run.status = %run.status,
            kairos.run.attempt = run.attempt,
            kairos.report.status = report.reported.as_str(),
            kairos.report.channel = report.channel,
            kairos.report.trace_id = reported_ids.map(|(trace, _)| trace),
        );
    }
}

/// Nanoseconds since the Unix epoch (0 before it).
fn unix_ns(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    })
}
