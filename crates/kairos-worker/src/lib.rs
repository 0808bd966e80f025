//! The worker roles every kairos instance runs: the planner (due schedules → run rows),
//! the dispatcher (due run rows → launch messages) and retention (old finished runs → gone).
//! No leader: claims are row locks held by a transaction, so a killed instance releases
//! everything it held. [`metrics`] records what their reports say.

pub mod crash;
pub mod dispatcher;
pub mod metrics;
pub mod planner;
pub mod retention;
