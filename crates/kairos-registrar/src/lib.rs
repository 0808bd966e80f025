//! The registrar: validates schedules and workflows and stores them (docs/design.md §3–§6).
//!
//! - [`Registrar::upsert`] checks every field (all problems at once), computes `next_run_at`
//!   from `max(db now, start_at)` with the core's rules, and writes with a revision check.
//!   A change of spec, zone, window or jitter reconciles the schedule's unpublished runs.
//! - [`Registrar::set_paused`], [`Registrar::delete`], [`Registrar::get`] (with a preview of
//!   the next five ticks), [`Registrar::list`], [`Registrar::runs`], [`Registrar::preview`].
//! - [`Registrar::put_workflow`]: an immutable DAG per version, and optionally the
//!   workflow's full schedule set, synced in one transaction.
//! - [`Registrar::put_calendar`] (re-plans the schedules that use it),
//!   [`Registrar::get_calendar`], [`Registrar::list_calendars`],
//!   [`Registrar::delete_calendar`] (refused while in use).
//! - [`Registrar::pause`] (with a note and an end, `until`, at which a planner resumes it:
//!   [`resume_ended_pauses`]), [`Registrar::skip`], [`Registrar::skips`] and
//!   [`Registrar::unskip`] (one occurrence not run, and taken back).
//! - [`Registrar::trigger`] (run now, keyed on a request id) and [`Registrar::backfill`]
//!   (a range of ticks with the planner's keys).
//!
//! - [`Registrar::upsert_dry_run`], [`Registrar::put_workflow_dry_run`]: the same writes in a
//!   transaction that is rolled back, answering what they would do.
//!
//! - [`Registrar::history`]: the history of changes. Every write records what it changed,
//!   by whom ([`Registrar::acting_as`]) and why, in its own transaction.
//!
//! - [`parse_spec`]: a spec read as the checks above read it, for the page's sentence.
//!
//! Every error means nothing changed: each call is one transaction.

mod apply;
mod attempts;
mod calendars;
mod chains;
mod checks;
mod cursor;
pub mod dag;
mod dry_run;
mod error;
pub mod fields;
#[doc(hidden)]
pub mod fuzzing;
mod history;
mod input;
mod overview;
mod paused_ticks;
mod pauses;
pub mod regions;
mod restage;
mod rules;
mod run_listing;
mod runs;
mod schedules;
mod skips;
mod timetables;
mod workflows;

pub use attempts::{DeadLetterQuery, RunView};
pub use calendars::{CalendarInput, CalendarWritten, MAX_DESCRIPTION_CHARS};
pub use checks::{LIST_LIMIT_MAX, MAX_PAUSE_NOTE_CHARS};
pub use cursor::RunPage;
pub use dry_run::{Change, DryRun, ScheduleChange};
pub use error::{Error, Problem, Result};
pub use history::{HistoryPage, HistoryQuery};
pub use input::MAX_DEADLINE_S;
pub use input::{
    derived_schedule_id, parse_spec, BackoffInput, DagLimit, ScheduleInput, Settings,
    MAX_CRON_EXPR_LEN, MAX_POLICY_LEN, MAX_TIMEZONE_LEN, RESERVED_SCHEDULE_IDS,
};
pub use kairos_core::{
    Attempt, AttemptLog, Calendar, Run, RunFilter, RunRef, Schedule, ScheduleStats, Skip,
};
pub use overview::{
    in_flight_for, run_status, BackfillPlan, RowPage, ScheduleDetail, ScheduleRow, Upcoming,
    LIST_STATS_WINDOW,
};
pub use paused_ticks::{record_paused_ticks, PausedTicks, PAUSED_SCHEDULES_PER_PASS};
pub use pauses::{resume_ended_pauses, PauseChange, Resumed, PAUSE_ENDED_BY};
pub use restage::{restage, Restaged};
pub use rules::{rfc3339, RulesInput};
pub use run_listing::{Phase, RunQuery};
pub use runs::{Backfilled, Triggered, BACKFILL_MAX_TICKS};
pub use schedules::{Page, Preview, PreviewInput, ScheduleView, Upserted};
pub use skips::{MAX_SKIP_NOTE_CHARS, SKIPS_LIST_MAX};
pub use workflows::{
    Deployed, VersionSummary, WorkflowInput, WorkflowPage, WorkflowSummary, WorkflowView,
    WORKFLOW_VERSIONS_MAX,
};

/// The store's filters and values the registrar's reads take and give, so that a caller
/// (the API, the page) reads through the registrar alone.
pub use kairos_store::overview::HourTotals;
pub use kairos_store::runs::CHILDREN_MAX;
pub use kairos_store::schedules::ListFilter;

use chrono::{DateTime, Utc};
use kairos_store::{PgPool, Tx};

/// The registrar over one PostgreSQL pool. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Registrar {
    pool: PgPool,
    settings: Settings,
    /// Who its writes are recorded as made by, in the history of changes.
    actor: kairos_core::Actor,
}

impl Registrar {
    /// A registrar writing to `pool` with `settings`.
    pub fn new(pool: PgPool, settings: Settings) -> Registrar {
        Registrar {
            pool,
            settings,
            actor: kairos_core::Actor::system(),
        }
    }

    /// The pool it writes to.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Its settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The database's clock (or the pinned one), read inside the caller's transaction.
    async fn now(&self, tx: &mut Tx) -> Result<DateTime<Utc>> {
        Ok(kairos_store::now(&mut **tx, self.settings.pinned_now).await?)
    }
}
