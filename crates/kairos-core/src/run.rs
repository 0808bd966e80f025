//! The run lifecycle's vocabulary (docs/design.md §3): the status of a run row, where it came
//! from, and what an executor reports. Each enum's text is written in its mapping here;
//! Rust code uses the variants, and the store's statements take their status groups from
//! these enums (`kairos_store` `groups.rs`) where they are not spelled in SQL.

use std::fmt;
use std::str::FromStr;

use crate::names::named_enum;
use crate::UnknownName;

/// Where a run is in its lifecycle. `docs/run_state_machine.md` draws the transitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunStatus {
    /// Planned, not yet published.
    Pending,
    /// Waiting behind an in-flight run of its schedule (overlap `queue`).
    Queued,
    /// Published; JetStream acknowledged it.
    Enqueued,
    /// An executor reported that it began.
    Started,
    /// Ended well.
    Success,
    /// Ended badly, or could not be launched.
    Failed,
    /// In flight longer than its schedule's `max_run_seconds`.
    TimedOut,
    /// Not launched: overlap `skip`.
    Skipped,
    /// Not launched (paused, deleted or rescheduled before it was published), or cancelled
    /// by an operator (`POST /runs/{key}/cancel`).
    Cancelled,
    /// An attempt failed or timed out and the next one waits for its time (`fire_at`). It
    /// still holds its schedule: for exclusive schedules it counts as the run in flight.
    Retrying,
    /// An operator asked to cancel it while it was published (`ENQUEUED` or `STARTED`); the
    /// executor has not confirmed yet. It still holds its schedule.
    Cancelling,
}

impl RunStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [RunStatus; 11] = [
        RunStatus::Pending,
        RunStatus::Queued,
        RunStatus::Enqueued,
        RunStatus::Started,
        RunStatus::Success,
        RunStatus::Failed,
        RunStatus::TimedOut,
        RunStatus::Skipped,
        RunStatus::Cancelled,
        RunStatus::Retrying,
        RunStatus::Cancelling,
    ];

    /// Its current attempt is not published: no executor can be running it.
    pub fn unpublished(self) -> bool {
        matches!(
            self,
            RunStatus::Pending | RunStatus::Queued | RunStatus::Retrying
        )
    }

    /// Published and not finished: an executor owes an answer.
    pub fn in_flight(self) -> bool {
        matches!(
            self,
            RunStatus::Enqueued | RunStatus::Started | RunStatus::Cancelling
        )
    }

    /// Holds its schedule: an exclusive schedule has at most one run in this set (the
    /// table `runs_in_flight`, kept by triggers). It is [`RunStatus::in_flight`] plus
    /// `RETRYING`: a run between attempts is not published, yet its next attempt will be,
    /// so nothing else of its schedule may launch meanwhile.
    pub fn holds_schedule(self) -> bool {
        self.in_flight() || self == RunStatus::Retrying
    }

    /// The statuses that hold a schedule ([`RunStatus::holds_schedule`]), for statements
    /// that bind the set rather than spell it.
    pub fn holding() -> impl Iterator<Item = RunStatus> {
        RunStatus::every(RunStatus::holds_schedule)
    }

    /// Every status in `phase`, in lifecycle order: what the store writes into its
    /// statements as a group, so no statement spells one by hand.
    pub fn every(phase: fn(RunStatus) -> bool) -> impl Iterator<Item = RunStatus> {
        RunStatus::ALL.into_iter().filter(move |s| phase(*s))
    }

    /// The dispatcher publishes it once its `fire_at` comes: a first attempt (`PENDING`)
    /// or the next one (`RETRYING`).
    pub fn awaits_launch(self) -> bool {
        matches!(self, RunStatus::Pending | RunStatus::Retrying)
    }

    /// A tick whose first attempt is not published yet (`PENDING`, or `QUEUED` behind a run
    /// of its schedule): a write of the schedule may still cancel it.
    pub fn planned(self) -> bool {
        matches!(self, RunStatus::Pending | RunStatus::Queued)
    }

    /// Nothing moves it any more.
    pub fn terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Success
                | RunStatus::Failed
                | RunStatus::TimedOut
                | RunStatus::Skipped
                | RunStatus::Cancelled
        )
    }
}

/// What created a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunSource {
    /// A tick the planner enumerated.
    Schedule,
    /// `POST /schedules/{id}/trigger`.
    Manual,
    /// `POST /schedules/{id}/backfill`.
    Backfill,
    /// `POST /run-launcher/start`: the caller's key, no schedule.
    Api,
    /// A chained schedule (`@after <parent>`): a run of its parent reached the outcome it
    /// waits for.
    Chain,
}

/// What an executor reports about a run (`POST /runs/{key}/status`, or the NATS status
/// subject).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reported {
    /// The run began.
    Started,
    /// The run ended well.
    Success,
    /// The run ended badly.
    Failed,
    /// The run is alive (a long run says so now and then; its schedule's
    /// `heartbeat_timeout_s` times out a run that stops saying it).
    Heartbeat,
    /// The executor stopped the run (after a cancel message, or on its own). Never retried.
    Cancelled,
}

/// The name of a heartbeat report (the other reports are named after their status).
const HEARTBEAT: &str = "HEARTBEAT";

impl Reported {
    /// Every report.
    pub const ALL: [Reported; 5] = [
        Reported::Started,
        Reported::Success,
        Reported::Failed,
        Reported::Heartbeat,
        Reported::Cancelled,
    ];

    /// The status the run takes when the report applies (a heartbeat moves nothing).
    pub fn status(self) -> Option<RunStatus> {
        match self {
            Reported::Started => Some(RunStatus::Started),
            Reported::Success => Some(RunStatus::Success),
            Reported::Failed => Some(RunStatus::Failed),
            Reported::Heartbeat => None,
            Reported::Cancelled => Some(RunStatus::Cancelled),
        }
    }
}

named_enum!(RunStatus, "status",
    "PENDING, QUEUED, ENQUEUED, STARTED, SUCCESS, FAILED, TIMED_OUT, SKIPPED, CANCELLED, \
     RETRYING, CANCELLING", {
    Pending => "PENDING", Queued => "QUEUED", Enqueued => "ENQUEUED", Started => "STARTED",
    Success => "SUCCESS", Failed => "FAILED", TimedOut => "TIMED_OUT", Skipped => "SKIPPED",
    Cancelled => "CANCELLED", Retrying => "RETRYING", Cancelling => "CANCELLING"
});
named_enum!(RunSource, "source", "schedule, manual, backfill, api, chain", {
    Schedule => "schedule", Manual => "manual", Backfill => "backfill", Api => "api",
    Chain => "chain"
});
impl Reported {
    /// The name as sent: the name of the status it leads to, or `HEARTBEAT`.
    pub fn as_str(self) -> &'static str {
        self.status().map_or(HEARTBEAT, RunStatus::as_str)
    }
}

impl FromStr for Reported {
    type Err = UnknownName;

    fn from_str(value: &str) -> Result<Self, UnknownName> {
        let reported = Reported::ALL.into_iter().find(|r| r.as_str() == value);
        reported.ok_or_else(|| UnknownName {
            field: "status",
            value: value.to_string(),
            allowed: "STARTED, HEARTBEAT, SUCCESS, FAILED, CANCELLED",
        })
    }
}

impl fmt::Display for Reported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_round_trips_through_its_name() {
        for status in RunStatus::ALL {
            assert_eq!(status.as_str().parse::<RunStatus>(), Ok(status));
        }
        let err = "DONE".parse::<RunStatus>().expect_err("unknown");
        assert_eq!(err.field, "status");
    }

    #[test]
    fn each_status_is_in_exactly_one_phase() {
        for status in RunStatus::ALL {
            let phases = [status.unpublished(), status.in_flight(), status.terminal()];
            assert_eq!(phases.iter().filter(|p| **p).count(), 1, "{status}");
        }
    }

    #[test]
    fn the_statuses_that_hold_a_schedule_are_the_in_flight_table_s() {
        // Migration 20260116000000_partitions.sql spells this set in its triggers.
        let names: Vec<&str> = RunStatus::holding().map(RunStatus::as_str).collect();
        assert_eq!(names, ["ENQUEUED", "STARTED", "RETRYING", "CANCELLING"]);
    }

    #[test]
    fn reports_name_the_status_they_lead_to() {
        for reported in Reported::ALL {
            assert_eq!(reported.as_str().parse::<Reported>(), Ok(reported));
        }
        assert!("SKIPPED".parse::<Reported>().is_err());
    }
}
