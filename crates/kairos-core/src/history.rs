//! The history of changes (the audit log) as plain values: who ([`Actor`]) did what
//! ([`ChangeKind`]) to which thing ([`Subject`]), why (a note), and which fields moved from
//! what to what ([`FieldChange`]). kairos-store writes a [`Change`] in the transaction of the
//! write it describes and reads rows back as [`HistoryEntry`].
//!
//! The field lists are built here, from the stored values ([`schedule_fields`],
//! [`calendar_fields`]), so every writer describes a schedule the same way.

mod fields;

use chrono::{DateTime, Utc};

use crate::names::named_enum;

pub use fields::{calendar_fields, schedule_fields};

/// Who made a change: the caller's name and the request that carried it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// The static token's `name`, the JWT's `sub`, `anonymous` when auth is off, or
    /// [`Actor::SYSTEM`] for a write no caller asked for.
    pub name: String,
    /// The API request's id (`X-Request-Id`); `None` outside a request.
    pub request_id: Option<String>,
}

impl Actor {
    /// The name of writes made by kairos itself or by code that names no caller.
    pub const SYSTEM: &'static str = "kairos";

    /// A caller's change, made in request `request_id`.
    pub fn new(name: impl Into<String>, request_id: Option<String>) -> Actor {
        Actor {
            name: name.into(),
            request_id,
        }
    }

    /// A change no caller asked for ([`Actor::SYSTEM`], no request).
    pub fn system() -> Actor {
        Actor::new(Actor::SYSTEM, None)
    }
}

/// What kind of write a change was. Add a variant (and its name below) for a new write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// A schedule, calendar or workflow version that did not exist was written.
    Create,
    /// An existing schedule or calendar was changed.
    Update,
    /// A workflow deploy created, changed or deleted one of its schedules.
    DeploySync,
    /// A schedule was paused (or its pause note replaced).
    Pause,
    /// A schedule was resumed.
    Resume,
    /// A schedule or calendar was deleted.
    Delete,
    /// A run was triggered now.
    Trigger,
    /// Past ticks were backfilled.
    Backfill,
    /// An operator cancelled a run.
    Cancel,
    /// An operator asked one more attempt of a finished run.
    Retry,
    /// An operator skipped one future tick of a schedule.
    Skip,
    /// An operator took a skip back before its tick.
    Unskip,
}

named_enum!(ChangeKind, "kind",
    "create, update, deploy_sync, pause, resume, delete, trigger, backfill, cancel, retry, skip, \
     unskip", {
    Create => "create", Update => "update", DeploySync => "deploy_sync", Pause => "pause",
    Resume => "resume", Delete => "delete", Trigger => "trigger", Backfill => "backfill",
    Cancel => "cancel", Retry => "retry", Skip => "skip", Unskip => "unskip"
});

/// What a change was made to. A schedule's change also names its workflow, so that the
/// history of a workflow holds its schedules' changes; a run's change names its schedule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subject {
    /// The schedule changed (or whose run was).
    pub schedule_id: Option<String>,
    /// The calendar changed.
    pub calendar: Option<String>,
    /// The workflow deployed, or the changed schedule's workflow.
    pub workflow_id: Option<String>,
    /// The workflow version deployed.
    pub version: Option<i32>,
    /// The run triggered, cancelled or retried.
    pub run_key: Option<String>,
}

impl Subject {
    /// A schedule of workflow `workflow_id`.
    pub fn schedule(schedule_id: &str, workflow_id: &str) -> Subject {
        Subject {
            schedule_id: Some(schedule_id.to_string()),
            workflow_id: Some(workflow_id.to_string()),
            ..Subject::default()
        }
    }

    /// The named calendar.
    pub fn calendar(name: &str) -> Subject {
        Subject {
            calendar: Some(name.to_string()),
            ..Subject::default()
        }
    }

    /// One workflow version.
    pub fn workflow(workflow_id: &str, version: i32) -> Subject {
        Subject {
            workflow_id: Some(workflow_id.to_string()),
            version: Some(version),
            ..Subject::default()
        }
    }

    /// Run `run_key` of a schedule (`schedule_id` empty: a run of no schedule).
    pub fn run(run_key: &str, schedule_id: &str, workflow_id: &str) -> Subject {
        Subject {
            schedule_id: Some(schedule_id.to_string()).filter(|id| !id.is_empty()),
            workflow_id: Some(workflow_id.to_string()),
            run_key: Some(run_key.to_string()),
            ..Subject::default()
        }
    }
}

/// A field's value before or after a change.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    /// Not set.
    Null,
    /// A flag.
    Bool(bool),
    /// A whole number.
    Int(i64),
    /// A fraction (the backoff multiplier).
    Float(f64),
    /// A text, a name, or an instant (RFC 3339, UTC).
    Text(String),
    /// A list (exclusions, calendars, retry intervals, dates).
    List(Vec<FieldValue>),
}

impl FieldValue {
    /// An optional value: `None` is [`FieldValue::Null`].
    pub fn of<T: Into<FieldValue>>(value: Option<T>) -> FieldValue {
        value.map_or(FieldValue::Null, Into::into)
    }
}

impl From<bool> for FieldValue {
    fn from(value: bool) -> FieldValue {
        FieldValue::Bool(value)
    }
}

impl From<i32> for FieldValue {
    fn from(value: i32) -> FieldValue {
        FieldValue::Int(i64::from(value))
    }
}

impl From<i64> for FieldValue {
    fn from(value: i64) -> FieldValue {
        FieldValue::Int(value)
    }
}

impl From<u64> for FieldValue {
    fn from(value: u64) -> FieldValue {
        FieldValue::Int(i64::try_from(value).unwrap_or(i64::MAX))
    }
}

impl From<f64> for FieldValue {
    fn from(value: f64) -> FieldValue {
        FieldValue::Float(value)
    }
}

impl From<&str> for FieldValue {
    fn from(value: &str) -> FieldValue {
        FieldValue::Text(value.to_string())
    }
}

impl From<String> for FieldValue {
    fn from(value: String) -> FieldValue {
        FieldValue::Text(value)
    }
}

impl From<DateTime<Utc>> for FieldValue {
    fn from(value: DateTime<Utc>) -> FieldValue {
        FieldValue::Text(value.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
    }
}

impl<T: Into<FieldValue>> From<Vec<T>> for FieldValue {
    fn from(values: Vec<T>) -> FieldValue {
        FieldValue::List(values.into_iter().map(Into::into).collect())
    }
}

/// One field that a change moved from `old` to `new` (`Null` on the side where it did not
/// exist: a create has only new values, a delete only old ones).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldChange {
    /// The field's name, as the API names it.
    pub field: String,
    /// Before the change.
    pub old: FieldValue,
    /// After the change.
    pub new: FieldValue,
}

impl FieldChange {
    /// `field` moved from `old` to `new`.
    pub fn new(field: &str, old: impl Into<FieldValue>, new: impl Into<FieldValue>) -> Self {
        FieldChange {
            field: field.to_string(),
            old: old.into(),
            new: new.into(),
        }
    }
}

/// One change as a writer records it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// What was changed.
    pub subject: Subject,
    /// How.
    pub kind: ChangeKind,
    /// By whom, in which request.
    pub actor: Actor,
    /// Why (a pause note, a cancel reason), as the caller wrote it.
    pub note: Option<String>,
    /// The fields that changed, old → new.
    pub fields: Vec<FieldChange>,
}

/// One recorded change, as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEntry {
    /// Its place in the history: larger is newer.
    pub id: i64,
    /// When it was recorded (the database clock of its transaction).
    pub at: DateTime<Utc>,
    /// The change.
    pub change: Change,
}

/// Which changes a history listing answers, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryFilter {
    /// Only this schedule's changes (and its runs').
    pub schedule_id: Option<String>,
    /// Only this calendar's.
    pub calendar: Option<String>,
    /// Only this workflow's (its versions and its schedules).
    pub workflow_id: Option<String>,
    /// Only this run's (with `schedule_id`, whose index finds them).
    pub run_key: Option<String>,
    /// Only this actor's.
    pub actor: Option<String>,
    /// Only changes of this kind.
    pub kind: Option<ChangeKind>,
    /// Only changes recorded at or after this instant.
    pub since: Option<DateTime<Utc>>,
    /// Only changes recorded before this instant.
    pub until: Option<DateTime<Utc>>,
    /// Only changes older than this entry id (the previous page's last).
    pub before_id: Option<i64>,
    /// At most this many.
    pub limit: i64,
}
