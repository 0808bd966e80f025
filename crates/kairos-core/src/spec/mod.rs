//! [`Spec`]: one schedule string — a cron expression, `@every <duration>`, `@at <RFC3339>`
//! or the chained trigger `@after <schedule_id> [on success|failure|always]` — checked
//! against docs/design.md §4.1 and ready to be evaluated by a `Timetable` (a chained trigger's
//! timetable never fires: its runs come from its parent's, not from the clock).

mod after;
mod calendar;
mod error;
mod every;
mod syntax;

use chrono::{DateTime, NaiveDate, Utc};
use std::sync::Arc;

pub use after::{Chain, ChainOn};
pub(crate) use calendar::{Calendar, Days, WallGap};
pub use error::{CronField, SpecError};

/// First year a schedule can fire in.
pub const MIN_YEAR: i32 = 1970;
/// Last year searched: nothing found before its end means the schedule is exhausted.
pub const HORIZON_YEAR: i32 = 2199;

/// How a cron job behaves across DST transitions (docs/design.md §4 rule 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// No time field starts with `*`: fires once per matching local time, even in a gap
    /// (at the jump) or an overlap (at the first occurrence).
    FixedTime,
    /// The minute, hour or written seconds field starts with `*`: fires at every real
    /// occurrence of a matching local time, none inside a gap.
    Wildcard,
}

/// A parsed schedule spec. Immutable; cheap to clone.
#[derive(Debug, Clone)]
pub struct Spec {
    text: String,
    pub(crate) rule: Rule,
}

/// What a spec means, evaluated by `Timetable`.
#[derive(Debug, Clone)]
pub(crate) enum Rule {
    Cron {
        calendar: Arc<Calendar>,
        kind: JobKind,
    },
    Every {
        seconds: i64,
    },
    At {
        at: DateTime<Utc>,
    },
    After(Chain),
}

impl Spec {
    /// Parses a schedule spec.
    ///
    /// # Errors
    /// A [`SpecError`] naming the field, the value and the rule, for any of the rejections
    /// of docs/design.md §4.1 (including an expression that never fires between 1970 and 2199).
    pub fn parse(text: &str) -> Result<Spec, SpecError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(SpecError::Empty);
        }
        let rule = match trimmed.split_once(char::is_whitespace) {
            Some((word, rest)) if word.eq_ignore_ascii_case("@every") => Rule::Every {
                seconds: every::parse_duration(rest.trim())?,
            },
            Some((word, rest)) if word.eq_ignore_ascii_case("@at") => Rule::At {
                at: every::parse_at(rest.trim())?,
            },
            Some((word, rest)) if word.eq_ignore_ascii_case("@after") => {
                Rule::After(after::parse(rest)?)
            }
            None if trimmed.eq_ignore_ascii_case("@after") => Rule::After(after::parse("")?),
            _ if trimmed.starts_with('@') => cron_rule(trimmed, nickname(trimmed)?)?,
            _ => cron_rule(trimmed, trimmed)?,
        };
        Ok(Spec {
            text: trimmed.to_string(),
            rule,
        })
    }

    /// The spec as written (trimmed).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The DST behaviour of a cron spec; `None` for `@every` and `@at`, which are instants.
    pub fn job_kind(&self) -> Option<JobKind> {
        match &self.rule {
            Rule::Cron { kind, .. } => Some(*kind),
            Rule::Every { .. } | Rule::At { .. } | Rule::After(_) => None,
        }
    }

    /// The parent and outcome of a chained trigger (`@after`); `None` for a timetable.
    pub fn chain(&self) -> Option<&Chain> {
        match &self.rule {
            Rule::After(chain) => Some(chain),
            _ => None,
        }
    }
}

fn cron_rule(written: &str, expr: &str) -> Result<Rule, SpecError> {
    let text = syntax::read(expr)?;
    // Every field passed our own rules, so the matcher refusing is rare; name the whole
    // expression rather than guess a field.
    let calendar = Calendar::new(&text.normalized).map_err(|err| SpecError::Calendar {
        expr: written.to_string(),
        reason: err.to_string(),
    })?;
    let epoch = NaiveDate::from_ymd_opt(MIN_YEAR, 1, 1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .expect("1970-01-01 is a valid date");
    if calendar.first_at_or_after(epoch).is_none() {
        return Err(SpecError::NeverFires {
            expr: written.to_string(),
        });
    }
    Ok(Rule::Cron {
        calendar: Arc::new(calendar),
        kind: text.kind,
    })
}

/// The 5-field expression of a nickname (`@midnight` is mapped here: croner rejects it).
fn nickname(word: &str) -> Result<&'static str, SpecError> {
    let expr = match word.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        "@reboot" => {
            return Err(SpecError::Nickname {
                nickname: word.to_string(),
                rule: "kairos has no boot event to fire on; use @at <RFC3339> for a one-time run",
            })
        }
        _ => {
            return Err(SpecError::Nickname {
                nickname: word.to_string(),
                rule: "unknown; supported: @yearly @annually @monthly @weekly @daily @midnight \
                       @hourly, @every <duration>, @at <RFC3339>",
            })
        }
    };
    Ok(expr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clone_shares_the_parsed_calendar() {
        // A parsed cron calendar holds about 5 KiB; deploy syncs clone specs per schedule.
        let spec = Spec::parse("*/5 9-17 * * MON-FRI").expect("parses");
        let copy = spec.clone();
        match (&spec.rule, &copy.rule) {
            (Rule::Cron { calendar: a, .. }, Rule::Cron { calendar: b, .. }) => {
                assert!(Arc::ptr_eq(a, b), "the clone copied the calendar");
            }
            _ => panic!("a cron expression parses to a cron rule"),
        }
    }
}
