//! Calendar matching on local wall-clock times, delegated to `croner`'s parsed pattern.
//!
//! Only `croner`'s per-field matchers are used (`year_match`, `day_match`, …); the search
//! over wall times is ours, so it never meets `croner`'s DST handling or its search limits.
//! Wall times here are `NaiveDateTime`s: what a clock on the wall in the zone shows.

use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use croner::parser::{CronParser, Seconds, Year};
use croner::{Cron, Weekday};

use super::{HORIZON_YEAR, MIN_YEAR};

/// The calendar part of a cron expression: which wall-clock seconds match.
#[derive(Debug, Clone)]
pub(crate) struct Calendar {
    cron: Cron,
    seconds: Vec<u32>,
    minutes: Vec<u32>,
    hours: Vec<u32>,
}

impl Calendar {
    /// Parses the 7-field numeric form produced by `syntax::read`.
    pub(crate) fn new(normalized: &str) -> Result<Self, croner::errors::CronError> {
        let cron = CronParser::builder()
            .seconds(Seconds::Required)
            .year(Year::Required)
            .build()
            .parse(normalized)?;
        let values = |c: &croner::CronComponent| -> Vec<u32> {
            c.values().into_iter().map(u32::from).collect()
        };
        Ok(Calendar {
            seconds: values(&cron.pattern.seconds),
            minutes: values(&cron.pattern.minutes),
            hours: values(&cron.pattern.hours),
            cron,
        })
    }

    /// Whether the calendar day matches (year, month, day-of-month/day-of-week rules).
    fn day_matches(&self, date: NaiveDate) -> bool {
        let pattern = &self.cron.pattern;
        pattern.year_match(date.year()).unwrap_or(false)
            && pattern.month_match(date.month()).unwrap_or(false)
            && pattern
                .day_match(
                    date.year(),
                    date.month(),
                    date.day(),
                    Weekday::from_days_from_sunday(date.weekday().num_days_from_sunday()),
                )
                .unwrap_or(false)
    }

    /// The first matching wall time at or after `from`, up to the end of year 2199.
    pub(crate) fn first_at_or_after(&self, from: NaiveDateTime) -> Option<NaiveDateTime> {
        let mut date = from.date();
        let mut earliest = Some(from.time());
        while date.year() <= HORIZON_YEAR {
            if date.year() < MIN_YEAR.min(from.year()) {
                return None;
            }
            let pattern = &self.cron.pattern;
            if !pattern.year_match(date.year()).unwrap_or(false) {
                date = self.next_matching_year(date.year())?;
                earliest = None;
                continue;
            }
            if !pattern.month_match(date.month()).unwrap_or(false) {
                date = first_of_next_month(date)?;
                earliest = None;
                continue;
            }
            if self.day_matches(date) {
                let from_time = earliest.unwrap_or(NaiveTime::MIN);
                if let Some(time) = self.first_time_at_or_after(from_time) {
                    return Some(date.and_time(time));
                }
            }
            date = date.succ_opt()?;
            earliest = None;
        }
        None
    }

    fn next_matching_year(&self, year: i32) -> Option<NaiveDate> {
        (year + 1..=HORIZON_YEAR)
            .find(|y| self.cron.pattern.year_match(*y).unwrap_or(false))
            .and_then(|y| NaiveDate::from_ymd_opt(y, 1, 1))
    }

    /// The first matching time of day at or after `from` on a matching day.
    fn first_time_at_or_after(&self, from: NaiveTime) -> Option<NaiveTime> {
        for &hour in self.hours.iter().filter(|h| **h >= from.hour()) {
            let same_hour = hour == from.hour();
            let min_minute = if same_hour { from.minute() } else { 0 };
            for &minute in self.minutes.iter().filter(|m| **m >= min_minute) {
                let min_second = if same_hour && minute == from.minute() {
                    from.second()
                } else {
                    0
                };
                if let Some(&second) = self.seconds.iter().find(|s| **s >= min_second) {
                    return NaiveTime::from_hms_opt(hour, minute, second);
                }
            }
        }
        None
    }
}

fn first_of_next_month(date: NaiveDate) -> Option<NaiveDate> {
    let (year, month) = if date.month() == 12 {
        (date.year() + 1, 1)
    } else {
        (date.year(), date.month() + 1)
    };
    NaiveDate::from_ymd_opt(year, month, 1)
}
