//! Errors of spec parsing: each names the field, the value and the rule it broke.

use std::fmt;

/// A field of a cron expression, named as an error message names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CronField {
    /// Seconds (first of 6 or 7 fields).
    Second,
    /// Minutes.
    Minute,
    /// Hours.
    Hour,
    /// Day of month.
    DayOfMonth,
    /// Month.
    Month,
    /// Day of week.
    DayOfWeek,
    /// Year (last of 7 fields).
    Year,
}

impl CronField {
    /// The field's name in messages (`day-of-month`).
    pub fn name(self) -> &'static str {
        match self {
            CronField::Second => "second",
            CronField::Minute => "minute",
            CronField::Hour => "hour",
            CronField::DayOfMonth => "day-of-month",
            CronField::Month => "month",
            CronField::DayOfWeek => "day-of-week",
            CronField::Year => "year",
        }
    }

    /// Smallest and largest value a plain number may take in this field (day-of-week: 0 to
    /// 7, both Sunday); `*` and `*/n` span them.
    pub fn bounds(self) -> (u32, u32) {
        match self {
            CronField::Second | CronField::Minute => (0, 59),
            CronField::Hour => (0, 23),
            CronField::DayOfMonth => (1, 31),
            CronField::Month => (1, 12),
            CronField::DayOfWeek => (0, 7),
            CronField::Year => (super::MIN_YEAR as u32, super::HORIZON_YEAR as u32),
        }
    }
}

impl fmt::Display for CronField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a schedule spec was rejected. Display is one line naming the field, value and rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The spec string is empty or only white space.
    #[error("schedule spec is empty: write a cron expression, @every <duration> or @at <RFC3339>")]
    Empty,
    /// Not 5, 6 or 7 fields.
    #[error("cron expression has {found} field(s): expected 5 (minute hour day-of-month month day-of-week), 6 (second first) or 7 (year last)")]
    FieldCount {
        /// How many white-space separated fields were found.
        found: usize,
    },
    /// One field broke a syntax or range rule.
    #[error("{field} field {value:?}: {rule}")]
    Field {
        /// The field at fault.
        field: CronField,
        /// The field's text as written.
        value: String,
        /// The rule it broke.
        rule: String,
    },
    /// The two day fields combine in a way implementations disagree on.
    #[error("day-of-month {dom:?} with day-of-week {dow:?}: {rule}")]
    DayFields {
        /// The day-of-month field as written.
        dom: String,
        /// The day-of-week field as written.
        dow: String,
        /// The rule they broke.
        rule: &'static str,
    },
    /// An `@word` that is not a supported nickname.
    #[error("nickname {nickname:?}: {rule}")]
    Nickname {
        /// The nickname as written.
        nickname: String,
        /// Why it is not accepted.
        rule: &'static str,
    },
    /// Our rules accepted the expression but the calendar matcher did not.
    #[error("cron expression {expr:?}: {reason}")]
    Calendar {
        /// The expression as written.
        expr: String,
        /// What the matcher said.
        reason: String,
    },
    /// A syntactically valid expression that matches no time between 1970 and 2199.
    #[error("cron expression {expr:?} never fires (no matching time between 1970 and 2199)")]
    NeverFires {
        /// The expression as written.
        expr: String,
    },
    /// A bad `@every` duration.
    #[error("@every duration {value:?}: {rule}")]
    Every {
        /// The duration as written.
        value: String,
        /// The rule it broke.
        rule: String,
    },
    /// A bad `@after` chained trigger.
    #[error("@after {value:?}: {rule}")]
    After {
        /// The words after `@after` as written.
        value: String,
        /// The rule it broke.
        rule: String,
    },
    /// A bad `@at` time.
    #[error("@at time {value:?}: {rule}")]
    At {
        /// The time as written.
        value: String,
        /// The rule it broke.
        rule: String,
    },
}

impl SpecError {
    pub(crate) fn field(field: CronField, value: &str, rule: impl Into<String>) -> Self {
        SpecError::Field {
            field,
            value: value.to_string(),
            rule: rule.into(),
        }
    }
}
