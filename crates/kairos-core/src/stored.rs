//! What the store keeps, as plain values: a schedule ([`Schedule`], with its
//! [`FailurePolicy`] and [`CalendarRules`]), a run ([`Run`]) and its finished attempts
//! ([`Attempt`]), a named calendar ([`Calendar`]), a skipped tick ([`Skip`]), a schedule's run statistics
//! ([`ScheduleStats`], [`RunRef`]) and the filter of run listings ([`RunFilter`]).
//!
//! kairos-store reads its rows into these and writes them from these; the crates above it
//! see only these. Columns keep their stored widths (`i32`, `i64`); text columns are the
//! core's enums.

mod calendar;
mod failure;
mod run;
mod schedule;
mod skip;
mod stats;

pub use calendar::{Calendar, CalendarRules};
pub use failure::FailurePolicy;
pub use run::{Attempt, Run, RunFilter};
pub use schedule::Schedule;
pub use skip::{paused_reason, skip_reason, Skip};
pub use stats::{RunRef, ScheduleStats};
