//! A status report as the intake parsed it ([`StatusReport`]) and what it did to its run
//! ([`Applied`]): the intake's own values, whatever the channel.

use kairos_core::{Reported, Run};

/// One status report, as the intake parsed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusReport {
    /// The new status, or a heartbeat.
    pub status: Reported,
    /// The attempt it is about (from the launch message); a report about another attempt
    /// than the one in progress changes nothing. `None`: the attempt in progress.
    pub attempt: Option<u32>,
    /// `false` on a `FAILED` report: do not retry, whatever the policy says.
    pub retryable: Option<bool>,
    /// The executor's run id.
    pub run_id: Option<String>,
    /// The reporting executor; the first one to move the run forward owns it.
    pub executor_id: Option<String>,
    /// Why the run failed.
    pub error: Option<String>,
    /// A link to the attempt's logs (checked by `kairos_core::check_log_url`).
    pub log_url: Option<String>,
    /// The tail of the attempt's output (cut by `kairos_core::output_tail`).
    pub output: Option<String>,
}

/// What a report did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The run moved forward (or took a heartbeat); the run as it is now.
    Moved(Run),
    /// Repeated or stale: nothing changed; the run as it is.
    Unchanged(Run),
    /// Another executor owns the run (and it is not final, or this is a `STARTED`).
    Conflict {
        /// The run as it is.
        run: Run,
        /// Its owner.
        owner: String,
    },
    /// The run was never published, so no executor can be running it.
    Unpublished(Run),
    /// The run was not recorded as published and another run of its exclusive schedule
    /// is in flight: it cannot be in flight too.
    Blocked {
        /// The run as it is.
        run: Run,
        /// The key of the run in flight.
        in_flight: String,
    },
    /// No run has this key.
    NotFound,
}
