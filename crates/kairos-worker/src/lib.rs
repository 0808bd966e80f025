//! The worker roles every kairos instance runs: the planner (due schedules → run rows),
//! the dispatcher (due run rows → launch messages) and retention (old finished runs → gone).
//! No leader: claims are row locks held by a transaction, so a killed instance releases
//! everything it held. [`intake`] takes what executors and callers report about runs, over
//! HTTP or NATS, through one set of rules; [`metrics`] is the catalog every role records in.

pub mod crash;
pub mod dispatcher;
pub mod intake;
pub mod metrics;
pub mod planner;
pub mod retention;
mod wake;

/// An error and its causes on one line (`err: cause: cause`), for logs.
pub(crate) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
