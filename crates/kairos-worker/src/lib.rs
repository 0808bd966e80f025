//! The worker roles every kairos instance runs: the planner (due schedules → run rows),
//! the dispatcher (due run rows → launch messages), the [`sweep`]er (runs whose time ran
//! out: time-outs, cancels, lost launches, queued releases, dead letters) and retention
//! (old finished runs → gone).
//! No leader: claims are row locks held by a transaction, so a killed instance releases
//! everything it held. [`intake`] takes what executors and callers report about runs, over
//! HTTP or NATS, through one set of rules; [`metrics`] is the catalog every role records in.

pub mod crash;
pub mod dispatcher;
mod error;
pub mod intake;
mod messages;
pub mod metrics;
pub mod outage;
pub mod planner;
mod priority;
pub mod regions;
pub mod retention;
pub mod sweep;
mod wake;

pub use error::{Error, Result};
pub(crate) use kairos_core::error_chain;
/// The trace id of the run with key `key`, for the `trace_id` field of its log lines: the
/// trace its launch messages carry in `traceparent` (`kairos_core::trace`).
pub(crate) use kairos_core::trace::trace_id as trace_of;
