//! Exclusions: times that are not ticks of a schedule (docs/design.md §4 "Policies").
//!
//! - [`Exclusion`]: one entry of a schedule's `exclude` list — a date (`2026-12-25`), an
//!   inclusive date range (`2026-12-24..2026-12-26`), or a cron expression read on the wall
//!   clock of the schedule's zone (`* * * * SAT,SUN`, `0 12 * * *`).
//! - [`NamedCalendar`]: a named set of dates (`PUT /calendars/{name}`), at most
//!   [`MAX_CALENDAR_DATES`].
//! - [`Exclusions`]: a schedule's entries and calendars together; answers "is this date
//!   excluded?" and "is this wall time excluded?", naming what excluded it ([`ExcludedBy`]).
//!
//! Dates are local dates in the schedule's zone. A date, a range, a calendar and a cron
//! entry whose time fields are all `*` exclude whole **dates** (those are what `roll` moves
//! ticks off); any other cron entry excludes the wall times it matches, to the minute for a
//! 5-field expression (every second of `0 12 * * *`'s minute) and to the second otherwise.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use chrono::{Datelike, NaiveDate, NaiveDateTime};

use crate::spec::{Calendar, Rule, Spec, HORIZON_YEAR, MIN_YEAR};

/// Most dates a named calendar may hold.
pub const MAX_CALENDAR_DATES: usize = 10_000;
/// Most entries a schedule's `exclude` list may hold.
pub const MAX_EXCLUDE_ENTRIES: usize = 1_000;

/// Why an exclusion or a calendar was refused. Display names the value and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExclusionError {
    /// Not a date, not a range and not a cron expression.
    #[error("{text:?} is not a date (YYYY-MM-DD), a date range (YYYY-MM-DD..YYYY-MM-DD) or a cron expression")]
    Unrecognised {
        /// The entry as given.
        text: String,
    },
    /// A date that does not exist or lies outside 1970–2199.
    #[error("{text:?} is not a valid date between 1970-01-01 and 2199-12-31 (YYYY-MM-DD)")]
    Date {
        /// The date as given.
        text: String,
    },
    /// A range whose end is before its start.
    #[error("range {text:?} ends before it starts")]
    Backwards {
        /// The range as given.
        text: String,
    },
    /// A cron expression our syntax rules refuse (or `@every`/`@at`, which are not times
    /// of day).
    #[error("{text:?} is not a usable cron exclusion: {reason}")]
    Cron {
        /// The expression as given.
        text: String,
        /// Why.
        reason: String,
    },
    /// A calendar with more than [`MAX_CALENDAR_DATES`] dates.
    #[error("{count} dates is more than the {MAX_CALENDAR_DATES} a calendar may hold")]
    TooManyDates {
        /// How many were given.
        count: usize,
    },
}

/// One parsed `exclude` entry.
#[derive(Debug, Clone)]
pub struct Exclusion {
    text: String,
    entry: Entry,
}

#[derive(Debug, Clone)]
enum Entry {
    /// `first..=last` (a single date has `first == last`).
    Dates { first: NaiveDate, last: NaiveDate },
    /// A cron expression on the wall clock.
    Cron {
        calendar: Arc<Calendar>,
        to_the_minute: bool,
        whole_day: bool,
    },
}

impl Exclusion {
    /// Parses one entry: `YYYY-MM-DD`, `YYYY-MM-DD..YYYY-MM-DD` or a cron expression.
    ///
    /// # Errors
    /// [`ExclusionError`] naming the entry and the rule it broke.
    pub fn parse(text: &str) -> Result<Exclusion, ExclusionError> {
        let trimmed = text.trim();
        let entry = if let Some((first, last)) = trimmed.split_once("..") {
            let (first, last) = (parse_date(first.trim())?, parse_date(last.trim())?);
            if last < first {
                return Err(ExclusionError::Backwards {
                    text: trimmed.to_string(),
                });
            }
            Entry::Dates { first, last }
        } else if looks_like_date(trimmed) {
            let date = parse_date(trimmed)?;
            Entry::Dates {
                first: date,
                last: date,
            }
        } else if trimmed.contains(char::is_whitespace) || trimmed.starts_with('@') {
            cron_entry(trimmed)?
        } else {
            return Err(ExclusionError::Unrecognised {
                text: trimmed.to_string(),
            });
        };
        Ok(Exclusion {
            text: trimmed.to_string(),
            entry,
        })
    }

    /// The entry as written (trimmed).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether it excludes whole dates (a date, a range, or a cron entry matching every
    /// time of its days).
    pub fn whole_days(&self) -> bool {
        match &self.entry {
            Entry::Dates { .. } => true,
            Entry::Cron { whole_day, .. } => *whole_day,
        }
    }

    fn excludes_date(&self, date: NaiveDate) -> bool {
        match &self.entry {
            Entry::Dates { first, last } => (*first..=*last).contains(&date),
            Entry::Cron {
                calendar,
                whole_day,
                ..
            } => *whole_day && calendar.day_matches(date),
        }
    }

    fn excludes_time(&self, wall: NaiveDateTime) -> bool {
        match &self.entry {
            Entry::Dates { .. } => self.excludes_date(wall.date()),
            Entry::Cron {
                calendar,
                to_the_minute,
                ..
            } => calendar.matches(wall, *to_the_minute),
        }
    }
}

fn looks_like_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() >= 8 && bytes[..4].iter().all(u8::is_ascii_digit) && bytes[4] == b'-'
}

fn cron_entry(text: &str) -> Result<Entry, ExclusionError> {
    let cron_error = |reason: String| ExclusionError::Cron {
        text: text.to_string(),
        reason,
    };
    let spec = Spec::parse(text).map_err(|err| cron_error(err.to_string()))?;
    let Rule::Cron { calendar, .. } = spec.rule else {
        return Err(cron_error(
            "@every and @at are not times of day; write a cron expression".to_string(),
        ));
    };
    // Nicknames and 5-field expressions name no seconds: they exclude whole minutes.
    let to_the_minute = text.starts_with('@') || text.split_whitespace().count() == 5;
    Ok(Entry::Cron {
        whole_day: calendar.whole_day(to_the_minute),
        calendar,
        to_the_minute,
    })
}

/// Parses a calendar date, `YYYY-MM-DD`, between 1970-01-01 and 2199-12-31.
///
/// # Errors
/// [`ExclusionError::Date`].
pub fn parse_date(text: &str) -> Result<NaiveDate, ExclusionError> {
    let error = || ExclusionError::Date {
        text: text.to_string(),
    };
    if text.len() != 10 {
        return Err(error());
    }
    let date = NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| error())?;
    if !(MIN_YEAR..=HORIZON_YEAR).contains(&date.year()) {
        return Err(error());
    }
    Ok(date)
}

/// A named set of excluded dates (a holiday calendar).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedCalendar {
    name: String,
    dates: BTreeSet<NaiveDate>,
}

impl NamedCalendar {
    /// A calendar; repeated dates count once.
    ///
    /// # Errors
    /// [`ExclusionError::TooManyDates`] past [`MAX_CALENDAR_DATES`] distinct dates.
    pub fn new(
        name: impl Into<String>,
        dates: impl IntoIterator<Item = NaiveDate>,
    ) -> Result<NamedCalendar, ExclusionError> {
        let dates: BTreeSet<NaiveDate> = dates.into_iter().collect();
        if dates.len() > MAX_CALENDAR_DATES {
            return Err(ExclusionError::TooManyDates { count: dates.len() });
        }
        Ok(NamedCalendar {
            name: name.into(),
            dates,
        })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its dates, ascending.
    pub fn dates(&self) -> impl Iterator<Item = NaiveDate> + '_ {
        self.dates.iter().copied()
    }

    /// Whether it holds `date`.
    pub fn contains(&self, date: NaiveDate) -> bool {
        self.dates.contains(&date)
    }
}

/// What removed a time from a timetable.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ExcludedBy {
    /// An entry of the schedule's `exclude` list, as written.
    Entry(String),
    /// A named calendar of `exclude_calendars`.
    Calendar(String),
}

impl fmt::Display for ExcludedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExcludedBy::Entry(text) => write!(f, "exclude {text}"),
            ExcludedBy::Calendar(name) => write!(f, "calendar {name}"),
        }
    }
}

/// A schedule's exclusions: its `exclude` entries and its named calendars. Cheap to clone
/// (calendars are shared).
#[derive(Debug, Clone, Default)]
pub struct Exclusions {
    entries: Vec<Exclusion>,
    calendars: Vec<Arc<NamedCalendar>>,
}

impl Exclusions {
    /// Entries and calendars together.
    pub fn new(entries: Vec<Exclusion>, calendars: Vec<Arc<NamedCalendar>>) -> Exclusions {
        Exclusions { entries, calendars }
    }

    /// True when nothing is excluded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.calendars.is_empty()
    }

    /// What excludes the whole local `date`, if anything does.
    pub fn date_excluded(&self, date: NaiveDate) -> Option<ExcludedBy> {
        if let Some(entry) = self.entries.iter().find(|e| e.excludes_date(date)) {
            return Some(ExcludedBy::Entry(entry.text.clone()));
        }
        self.calendars
            .iter()
            .find(|c| c.contains(date))
            .map(|c| ExcludedBy::Calendar(c.name.clone()))
    }

    /// What excludes the local wall time `wall`, if anything does (a whole excluded date,
    /// or a cron entry matching it).
    pub fn excludes(&self, wall: NaiveDateTime) -> Option<ExcludedBy> {
        if let Some(entry) = self.entries.iter().find(|e| e.excludes_time(wall)) {
            return Some(ExcludedBy::Entry(entry.text.clone()));
        }
        self.calendars
            .iter()
            .find(|c| c.contains(wall.date()))
            .map(|c| ExcludedBy::Calendar(c.name.clone()))
    }

    /// Whether `date` is excluded as a whole (cheap form of [`Exclusions::date_excluded`]).
    pub(crate) fn excludes_date(&self, date: NaiveDate) -> bool {
        self.entries.iter().any(|e| e.excludes_date(date))
            || self.calendars.iter().any(|c| c.contains(date))
    }

    /// The last date any date entry, range or calendar names (cron entries repeat).
    pub fn last_listed_date(&self) -> Option<NaiveDate> {
        let entries = self.entries.iter().filter_map(|e| match e.entry {
            Entry::Dates { last, .. } => Some(last),
            Entry::Cron { .. } => None,
        });
        let calendars = self
            .calendars
            .iter()
            .filter_map(|c| c.dates.last().copied());
        entries.chain(calendars).max()
    }
}
