//! Domain types and time rules of kairos. No IO, no async.
//!
//! - [`Spec`]: one schedule string (cron, `@every <duration>`, `@at <RFC3339>`, or the
//!   chained trigger `@after <schedule_id>` ([`Chain`])), parsed with
//!   the syntax and rejections of docs/design.md §4.
//! - [`Timetable`]: a spec in an IANA zone with its anchor and `[start_at, end_at]` window;
//!   `next_after` applies the DST rules (gap, overlap, strictly-after, horizon 2199);
//!   `min_gap` is the smallest gap the spec leaves between two ticks.
//! - [`RunKey`]: the idempotency key of a tick or of a manual trigger; [`jitter_offset`].
//! - [`Exclusions`] ([`Exclusion`] entries and [`NamedCalendar`]s), [`Roll`], [`DstGap`],
//!   [`DstFold`]: a schedule's calendar rules, applied inside `Timetable::next_after`.
//! - [`ScheduleRules`]: a stored schedule's timing rules as one value, and the one
//!   `timetable()` that planning, previews, explanations and dry-runs build from them.
//! - [`OverlapPolicy`], [`CatchupPolicy`]: the schedule policies by name.
//! - [`RunStatus`], [`RunSource`], [`Reported`]: the run lifecycle's vocabulary.
//! - [`judge`]: what an executor's report does to a run ([`Verdict`]), the one rule every
//!   status channel applies.
//! - [`RetryPolicy`]: when the attempt after a failure starts, or that there is none.
//! - [`error_chain`]: an error and its causes on one line, for logs.
//! - [`plan()`]: the planner's pure decision for one schedule (catch-up, grace, jitter).
//! - [`AttemptLog`] ([`check_log_url`], [`output_tail`]): what executors report of an
//!   attempt's output.
//! - [`Schedule`], [`Run`], [`Attempt`], [`Calendar`], [`ScheduleStats`]: what the store
//!   keeps, as plain values (kairos-store maps its rows into them).
//! - [`Change`] ([`Actor`], [`ChangeKind`], [`Subject`], [`FieldChange`]): one entry of the
//!   history of changes, with the fields that differ ([`schedule_fields`]).

mod chain;
mod exclusion;
mod history;
mod id;
mod key;
mod logs;
mod names;
mod plan;
mod policy;
mod problem;
mod retry;
mod rules;
mod run;
mod spec;
mod stored;
mod timetable;
pub mod trace;
mod transition;
mod zone;

pub use chain::error_chain;
pub use exclusion::{
    parse_date, ExcludedBy, Exclusion, ExclusionError, Exclusions, NamedCalendar,
    MAX_CALENDAR_DATES, MAX_EXCLUDE_ENTRIES,
};
pub use history::{
    calendar_fields, schedule_fields, Actor, Change, ChangeKind, FieldChange, FieldValue,
    HistoryEntry, HistoryFilter, Subject,
};
pub use id::{validate_id, IdError, MAX_ID_LEN};
pub use key::{jitter_offset, RunKey, MAX_JITTER_MS};
pub use logs::{
    check_log_url, output_tail, AttemptLog, CUT_MARK, MAX_LOG_URL_LEN, MAX_OUTPUT_BYTES,
};
pub use names::UnknownName;
pub use plan::{
    plan, plan_keeping_dropped, DropReason, DroppedTick, Plan, PlanInput, PlanParams, PlannedRun,
    MAX_DROPPED_KEPT, MAX_MISSED_ENUMERATED,
};
pub use policy::{CatchupPolicy, DstFold, DstGap, OverlapPolicy, PolicyError, Roll};
pub use problem::Problem;
pub use retry::{RetryPolicy, RetryWait, MAX_ATTEMPTS, MAX_INTERVALS, MAX_RETRY_WAIT_S};
pub use rules::{Calendars, MissingCalendar, ScheduleRules};
pub use run::{Reported, RunSource, RunStatus};
pub use spec::{
    weekday_name, Chain, ChainOn, CronExpr, CronField, CronItem, EveryPart, EveryUnit, JobKind,
    Spec, SpecError, HORIZON_YEAR, MIN_YEAR,
};
pub use stored::{paused_reason, skip_reason, Skip};
pub use stored::{
    Attempt, Calendar, CalendarRules, FailurePolicy, Run, RunFilter, RunRef, Schedule,
    ScheduleStats,
};
pub use timetable::{
    DstNote, Excluded, MinGap, Occurrence, OutsideWindow, RuleSource, TickExplained, TickNote,
    Ticks, Timetable, WindowSide, MAX_EXCLUDED_IN_A_ROW, MAX_ROLL_DAYS,
};
pub use transition::{judge, moved_to, rank, AfterFailure, ReportFacts, RunFacts, Verdict};
pub use zone::{parse_zone, ZoneError};

/// Re-exported so that callers name zones with the same type the core evaluates them in.
pub use chrono_tz::Tz;
