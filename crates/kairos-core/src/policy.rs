//! Schedule policies by name, as stored and as sent over the API.

use crate::names::named_enum;

/// An unknown policy name (the one error of every named enum).
pub type PolicyError = crate::UnknownName;

/// What happens when a tick is due while an earlier run of the schedule is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OverlapPolicy {
    /// Fire anyway: runs may overlap.
    Allow,
    /// Record the tick as `SKIPPED`.
    #[default]
    Skip,
    /// Hold the tick as `QUEUED` until the in-flight run ends (at most the schedule's
    /// `max_queued` waiting; further ticks are `SKIPPED`, `queue_full`).
    Queue,
    /// Hold at most one tick as `QUEUED` behind the run in flight; further ticks are
    /// `SKIPPED` (`buffer_full`).
    BufferOne,
    /// Cancel the run in flight (operator-cancel protocol) and hold the tick as `QUEUED`
    /// until that run is `CANCELLED` (confirmed or timed out); at most one waits.
    CancelOther,
}

impl OverlapPolicy {
    /// At most one run of the schedule in flight (every policy but `allow`).
    pub fn exclusive(self) -> bool {
        self != OverlapPolicy::Allow
    }
}

/// What happens to ticks missed by more than the misfire grace (downtime).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CatchupPolicy {
    /// Do not fire them (counted, not stored).
    #[default]
    None,
    /// Fire them now, oldest first, bounded per pass.
    FireImmediately,
    /// Fire them spread evenly across the lookahead window.
    Spread,
}

/// Where a tick that falls on an excluded date goes (business-day rolling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Roll {
    /// It is removed, like any excluded time.
    #[default]
    None,
    /// To the same wall time on the next date that is not excluded.
    Forward,
    /// To the same wall time on the previous date that is not excluded.
    Backward,
}

/// What a cron job does with a wall time that does not exist (spring forward).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DstGap {
    /// Fire once at the instant the clocks jumped, if that is on the same local date
    /// (the rule for fixed-time jobs).
    Shift,
    /// Do not fire (the rule for wildcard jobs).
    Skip,
}

/// What a cron job does with a wall time that happens twice (fall back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DstFold {
    /// Fire at the first occurrence only (the rule for fixed-time jobs).
    First,
    /// Fire at the second occurrence only.
    Last,
    /// Fire at both occurrences (the rule for wildcard jobs).
    Both,
}

named_enum!(OverlapPolicy, "overlap_policy", "allow, skip, queue, buffer_one, cancel_other", {
    Allow => "allow", Skip => "skip", Queue => "queue", BufferOne => "buffer_one",
    CancelOther => "cancel_other"
});
named_enum!(CatchupPolicy, "catchup_policy", "none, fire_immediately, spread", {
    None => "none", FireImmediately => "fire_immediately", Spread => "spread"
});
named_enum!(Roll, "roll", "none, forward, backward", {
    None => "none", Forward => "forward", Backward => "backward"
});
named_enum!(DstGap, "dst_gap", "shift, skip", {
    Shift => "shift", Skip => "skip"
});
named_enum!(DstFold, "dst_fold", "first, last, both", {
    First => "first", Last => "last", Both => "both"
});
