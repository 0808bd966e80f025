//! [`Spec`]: one schedule string — a cron expression, `@every <duration>`, `@at <RFC3339>`
//! or the chained trigger `@after <schedule_id> [on success|failure|always]` — checked
//! against docs/design.md §4.1 and ready to be evaluated by a `Timetable` (a chained trigger's
//! timetable never fires: its runs come from its parent's, not from the clock).

mod after;
mod calendar;
mod cron;
mod error;
mod every;
mod syntax;

use chrono::{DateTime, FixedOffset, NaiveDate};
use std::sync::Arc;

pub use after::{Chain, ChainOn};
pub(crate) use calendar::{Calendar, Days, WallGap};
pub use cron::{weekday_name, CronExpr, CronItem};
pub use error::{CronField, SpecError};
pub use every::{EveryPart, EveryUnit};

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
        /// The items the calendar was built from.
        expr: Arc<CronExpr>,
    },
    Every {
        seconds: i64,
        /// The duration as written, part by part.
        parts: Vec<EveryPart>,
    },
    At {
        /// The instant, with the offset it was written with.
        at: DateTime<FixedOffset>,
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
            Some((word, rest)) if word.eq_ignore_ascii_case("@every") => {
                let parts = every::parse_duration(rest.trim())?;
                Rule::Every {
                    seconds: every::total_seconds(&parts),
                    parts,
                }
            }
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

    /// The items of a cron spec's fields (a nickname as the expression it stands for);
    /// `None` for `@every`, `@at` and `@after`.
    pub fn cron(&self) -> Option<&CronExpr> {
        match &self.rule {
            Rule::Cron { expr, .. } => Some(expr),
            _ => None,
        }
    }

    /// The duration of an `@every` spec as written, part by part (`1h30m`: 1 hour, then 30
    /// minutes); `None` for other specs.
    pub fn every(&self) -> Option<&[EveryPart]> {
        match &self.rule {
            Rule::Every { parts, .. } => Some(parts),
            _ => None,
        }
    }

    /// The instant of an `@at` spec, with the UTC offset it was written with; `None` for
    /// other specs.
    pub fn at(&self) -> Option<DateTime<FixedOffset>> {
        match &self.rule {
            Rule::At { at } => Some(*at),
            _ => None,
        }
    }
}

fn cron_rule(written: &str, expr: &str) -> Result<Rule, SpecError> {
    let text = syntax::read(expr)?;
    // Every field passed our own rules, so the matcher refusing is rare; name the whole
    // expression rather than guess a field.
    let calendar = Calendar::new(&text.expr.numeric()).map_err(|err| SpecError::Calendar {
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
        expr: Arc::new(text.expr),
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

    #[test]
    fn a_cron_spec_keeps_the_items_its_calendar_was_built_from() {
        let spec = Spec::parse("0 0 1-7,L * +mon,5l,fri#3").expect("parses");
        let expr = spec.cron().expect("a cron spec");
        assert_eq!(expr.field(CronField::Second), [CronItem::Value(0)]);
        assert_eq!(expr.field(CronField::Hour), [CronItem::Value(0)]);
        assert_eq!(
            expr.field(CronField::DayOfMonth),
            [CronItem::Range(1, 7), CronItem::LastDay]
        );
        assert_eq!(expr.field(CronField::Month), [CronItem::Any]);
        assert_eq!(
            expr.field(CronField::DayOfWeek),
            [CronItem::Value(1), CronItem::LastOf(5), CronItem::Nth(5, 3)]
        );
        assert_eq!(expr.field(CronField::Year), [CronItem::Any]);
        assert!(expr.both_days());
        assert_eq!(expr.numeric(), "0 0 0 1-7,L * +1,5#L,5#3 *");
    }

    #[test]
    fn a_nickname_reads_as_the_expression_it_stands_for() {
        let weekly = Spec::parse("@weekly").expect("parses");
        let expr = weekly.cron().expect("a cron spec");
        assert_eq!(expr.field(CronField::DayOfWeek), [CronItem::Value(0)]);
        assert_eq!(expr.field(CronField::DayOfMonth), [CronItem::Any]);
        assert!(!expr.both_days());
    }

    #[test]
    fn weekdays_are_named_as_cron_numbers_them() {
        assert_eq!(weekday_name(0), Some("Sunday"));
        assert_eq!(weekday_name(5), Some("Friday"));
        assert_eq!(weekday_name(7), Some("Sunday"));
        assert_eq!(weekday_name(8), None);
    }

    #[test]
    fn every_keeps_its_parts_and_at_its_offset() {
        let every = Spec::parse("@every 1h30m").expect("parses");
        let parts = every.every().expect("an @every spec");
        assert_eq!(
            parts,
            [
                EveryPart {
                    amount: 1,
                    unit: EveryUnit::Hour
                },
                EveryPart {
                    amount: 30,
                    unit: EveryUnit::Minute
                }
            ]
        );
        assert!(matches!(every.rule, Rule::Every { seconds: 5_400, .. }));
        let at = Spec::parse("@at 2026-03-09T09:00:00+02:00").expect("parses");
        let instant = at.at().expect("an @at spec");
        assert_eq!(instant.to_rfc3339(), "2026-03-09T09:00:00+02:00");
        assert_eq!(instant.timestamp(), 1_773_039_600);
        assert!(every.cron().is_none() && at.every().is_none() && every.at().is_none());
    }
}
