//! A named calendar as stored, and a schedule's calendar rules as written (before
//! `kairos_store::timing` decodes them into [`crate::ScheduleRules`]).

use chrono::{DateTime, NaiveDate, Utc};

use crate::{DstFold, DstGap, Roll};

/// A schedule's calendar rules as stored (`exclude`, `exclude_calendars`, `roll`,
/// `dst_gap`, `dst_fold`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CalendarRules {
    /// `exclude` entries as written.
    pub exclude: Vec<String>,
    /// Names of the calendars it excludes.
    pub exclude_calendars: Vec<String>,
    /// Business-day rolling.
    pub roll: Roll,
    /// Its own gap rule; `None`: docs/design.md §4 for its kind.
    pub dst_gap: Option<DstGap>,
    /// Its own fold rule; `None`: docs/design.md §4 for its kind.
    pub dst_fold: Option<DstFold>,
}

/// A stored calendar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Calendar {
    /// Primary key.
    pub name: String,
    /// Free text.
    pub description: String,
    /// The excluded dates, ascending.
    pub dates: Vec<NaiveDate>,
    /// Incremented by every write.
    pub revision: i64,
    /// First written.
    pub created_at: DateTime<Utc>,
    /// Last written.
    pub updated_at: DateTime<Utc>,
}
