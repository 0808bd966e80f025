//! The worker roles every kairos instance runs: the planner (due schedules → run rows) and
//! the dispatcher (due run rows → launch messages). No leader: claims are row locks held by
//! a transaction, so a killed instance releases everything it held.

pub mod crash;
pub mod dispatcher;
pub mod planner;
