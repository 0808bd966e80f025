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
    pub(crate) fn day_matches(&self, date: NaiveDate) -> bool {
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
        self.first_at_or_after_on(from, &MatchingDays)
    }

    /// The first wall time at or after `from` whose time of day matches and whose date
    /// `days` accepts (the calendar's own days, or those days moved by exclusions and
    /// rolling), up to the end of year 2199.
    pub(crate) fn first_at_or_after_on(
        &self,
        from: NaiveDateTime,
        days: &dyn Days,
    ) -> Option<NaiveDateTime> {
        let mut date = from.date();
        loop {
            date = days.first_day_at_or_after(self, date)?;
            if date.year() > HORIZON_YEAR {
                return None;
            }
            let from_time = if date == from.date() {
                from.time()
            } else {
                NaiveTime::MIN
            };
            if let Some(time) = self.first_time_at_or_after(from_time) {
                return Some(date.and_time(time));
            }
            date = date.succ_opt()?;
        }
    }

    /// The first date at or after `from` whose day matches (year, month and day rules),
    /// up to the end of year 2199.
    pub(crate) fn first_matching_day(&self, from: NaiveDate) -> Option<NaiveDate> {
        let mut date = from;
        while date.year() <= HORIZON_YEAR {
            if date.year() < MIN_YEAR.min(from.year()) {
                return None;
            }
            let pattern = &self.cron.pattern;
            if !pattern.year_match(date.year()).unwrap_or(false) {
                date = self.next_matching_year(date.year())?;
                continue;
            }
            if !pattern.month_match(date.month()).unwrap_or(false) {
                date = first_of_next_month(date)?;
                continue;
            }
            if self.day_matches(date) {
                return Some(date);
            }
            date = date.succ_opt()?;
        }
        None
    }

    /// Whether the wall time matches: its day, and its time of day (to the minute only when
    /// `to_the_minute`, for a 5-field expression that names no seconds).
    pub(crate) fn matches(&self, wall: NaiveDateTime, to_the_minute: bool) -> bool {
        let time = wall.time();
        let second_ok = to_the_minute || self.seconds.contains(&time.second());
        second_ok
            && self.minutes.contains(&time.minute())
            && self.hours.contains(&time.hour())
            && self.day_matches(wall.date())
    }

    /// Whether every time of a matching day matches (`* * * * SAT,SUN`): such a
    /// calendar excludes whole dates. Seconds count only when `to_the_minute` is false.
    pub(crate) fn whole_day(&self, to_the_minute: bool) -> bool {
        self.hours.len() == 24
            && self.minutes.len() == 60
            && (to_the_minute || self.seconds.len() == 60)
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

/// Which dates a calendar's times of day fire on.
pub(crate) trait Days {
    /// The first date at or after `from` on which `calendar`'s times of day fire, or
    /// `None` when there is none before the end of 2199.
    fn first_day_at_or_after(&self, calendar: &Calendar, from: NaiveDate) -> Option<NaiveDate>;
}

/// The calendar's own matching days.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MatchingDays;

impl Days for MatchingDays {
    fn first_day_at_or_after(&self, calendar: &Calendar, from: NaiveDate) -> Option<NaiveDate> {
        calendar.first_matching_day(from)
    }
}

/// Two consecutive matching wall times and the wall-clock seconds between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WallGap {
    pub(crate) seconds: i64,
    pub(crate) earlier: NaiveDateTime,
    pub(crate) later: NaiveDateTime,
}

impl Calendar {
    /// The smallest wall-clock gap between two consecutive matching wall times from `from`
    /// to the end of 2199, with its first occurrence at or after `from`; `None` when fewer
    /// than two wall times match.
    ///
    /// Every matching day has the same times of day (seconds × minutes × hours, at most
    /// 86,400), so the gaps inside a day are known from that list alone. The gap across days, from the last time of one matching day
    /// to the first time of the next, depends on how close matching days come; they are
    /// enumerated up to the horizon, stopping early at two consecutive days.
    pub(crate) fn min_gap(&self, from: NaiveDateTime) -> Option<WallGap> {
        let times = self.times_of_day();
        let (&first_time, &last_time) = (times.first()?, times.last()?);
        // Its last time is at or after `from`, so every pair across days from here is too.
        let first_day = self.first_at_or_after(from)?.date();
        let at = |date: NaiveDate, second: u32| {
            NaiveTime::from_num_seconds_from_midnight_opt(second, 0).map(|t| date.and_time(t))
        };
        let within_day = times
            .windows(2)
            .map(|pair| pair[1] - pair[0])
            .min()
            .and_then(|smallest| {
                let pairs = times
                    .windows(2)
                    .filter(|pair| pair[1] - pair[0] == smallest);
                // The first pair that close still ahead of `from` on the first day, else
                // the first one of the next matching day (all of whose times are ahead).
                let (day, pair) = match pairs
                    .clone()
                    .find(|pair| at(first_day, pair[0]).is_some_and(|earlier| earlier >= from))
                {
                    Some(pair) => (first_day, pair),
                    None => {
                        let next = day_after(first_day)?;
                        (self.first_at_or_after(next)?.date(), pairs.clone().next()?)
                    }
                };
                Some(WallGap {
                    seconds: i64::from(smallest),
                    earlier: at(day, pair[0])?,
                    later: at(day, pair[1])?,
                })
            });
        let across_days = self
            .closest_matching_days(first_day)
            .and_then(|(day, next)| {
                Some(WallGap {
                    seconds: (next - day).num_days() * 86_400 - i64::from(last_time)
                        + i64::from(first_time),
                    earlier: at(day, last_time)?,
                    later: at(next, first_time)?,
                })
            });
        match (within_day, across_days) {
            (Some(within), Some(across)) if across.seconds < within.seconds => Some(across),
            (Some(within), _) => Some(within),
            (None, across) => across,
        }
    }

    /// A lower bound of [`Calendar::min_gap`] that needs no search of the calendar: the
    /// smallest gap inside a day, and the gap across midnight as if two matching days were
    /// always consecutive (they are at least a day apart). `None` when no time matches.
    pub(crate) fn gap_floor(&self) -> Option<i64> {
        let times = self.times_of_day();
        let (&first_time, &last_time) = (times.first()?, times.last()?);
        let across = 86_400 - i64::from(last_time) + i64::from(first_time);
        let within = times
            .windows(2)
            .map(|pair| i64::from(pair[1] - pair[0]))
            .min();
        Some(within.map_or(across, |within| within.min(across)))
    }

    /// Matching times of day as seconds from midnight, ascending.
    fn times_of_day(&self) -> Vec<u32> {
        let mut times: Vec<u32> = self
            .hours
            .iter()
            .flat_map(|&hour| {
                self.minutes.iter().flat_map(move |&minute| {
                    self.seconds
                        .iter()
                        .map(move |&second| hour * 3_600 + minute * 60 + second)
                })
            })
            .collect();
        times.sort_unstable();
        times.dedup();
        times
    }

    /// The first two successive matching days, starting at the matching day `first`, that
    /// are closest together; `None` when `first` is the only one before the horizon.
    fn closest_matching_days(&self, first: NaiveDate) -> Option<(NaiveDate, NaiveDate)> {
        let mut best: Option<(NaiveDate, NaiveDate)> = None;
        let mut day = first;
        while let Some(next) = day_after(day)
            .and_then(|next| self.first_at_or_after(next))
            .map(|wall| wall.date())
        {
            if best.is_none_or(|(a, b)| next - day < b - a) {
                best = Some((day, next));
            }
            if (next - day).num_days() == 1 {
                break;
            }
            day = next;
        }
        best
    }
}

/// Midnight of the day after `date`.
fn day_after(date: NaiveDate) -> Option<NaiveDateTime> {
    Some(date.succ_opt()?.and_time(NaiveTime::MIN))
}

fn first_of_next_month(date: NaiveDate) -> Option<NaiveDate> {
    let (year, month) = if date.month() == 12 {
        (date.year() + 1, 1)
    } else {
        (date.year(), date.month() + 1)
    };
    NaiveDate::from_ymd_opt(year, month, 1)
}
