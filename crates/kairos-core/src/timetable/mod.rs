//! [`Timetable`]: a [`Spec`] in an IANA zone, with its `@every` anchor, its inclusive
//! `[start_at, end_at]` window, its exclusions, `roll` and DST policy. `next_after` is the
//! one question the planner asks; exclusions, rolling and DST policy are applied inside it.

mod days;
mod describe;
mod dst;
mod explain;

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, Utc};
use chrono_tz::Tz;

use crate::exclusion::Exclusions;
use crate::spec::{Rule, Spec, WallGap, HORIZON_YEAR};
use crate::{DstFold, DstGap, Roll};

pub use days::MAX_ROLL_DAYS;
pub use describe::{OutsideWindow, TickExplained, WindowSide};
pub use explain::{DstNote, Excluded, Occurrence, RuleSource, TickNote};

/// Most ticks in a row that exclusions may remove before the search gives up and the
/// schedule counts as exhausted (so no evaluation can run for long). Whole excluded dates
/// do not count: they are skipped as dates, not tick by tick.
pub const MAX_EXCLUDED_IN_A_ROW: u32 = 1_000_000;

/// When a schedule fires. Pure: the same inputs always give the same ticks.
#[derive(Debug, Clone)]
pub struct Timetable {
    spec: Spec,
    zone: Tz,
    // Invariant: whole seconds; `start_at` when set, else the creation time.
    anchor: i64,
    start_at: Option<DateTime<Utc>>,
    end_at: Option<DateTime<Utc>>,
    exclusions: Exclusions,
    roll: Roll,
    dst_gap: Option<DstGap>,
    dst_fold: Option<DstFold>,
}

impl Timetable {
    /// A timetable with no window. `anchor` is where `@every` counts from (the schedule's
    /// creation time); a later [`Timetable::window`] with `start_at` replaces it.
    pub fn new(spec: Spec, zone: Tz, anchor: DateTime<Utc>) -> Self {
        Timetable {
            spec,
            zone,
            anchor: anchor.timestamp(),
            start_at: None,
            end_at: None,
            exclusions: Exclusions::default(),
            roll: Roll::None,
            dst_gap: None,
            dst_fold: None,
        }
    }

    /// Removes the times `exclusions` names (they are not ticks: not planned, not missed).
    pub fn exclude(mut self, exclusions: Exclusions) -> Self {
        self.exclusions = exclusions;
        self
    }

    /// Moves ticks on excluded dates instead of removing them (cron specs; `@every` and
    /// `@at` ticks are instants and are never rolled).
    pub fn roll(mut self, roll: Roll) -> Self {
        self.roll = roll;
        self
    }

    /// Replaces the DST rules of docs/design.md §4 (rules 5 and 6) for cron specs; `None` keeps
    /// the rule for the job's kind.
    pub fn dst(mut self, gap: Option<DstGap>, fold: Option<DstFold>) -> Self {
        self.dst_gap = gap;
        self.dst_fold = fold;
        self
    }

    /// Bounds the ticks to `[start_at, end_at]` (both inclusive, both optional).
    pub fn window(
        mut self,
        start_at: Option<DateTime<Utc>>,
        end_at: Option<DateTime<Utc>>,
    ) -> Self {
        if let Some(start) = start_at {
            self.anchor = start.timestamp();
        }
        self.start_at = start_at;
        self.end_at = end_at;
        self
    }

    /// The spec this timetable evaluates.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// The zone this timetable evaluates in.
    pub fn zone(&self) -> Tz {
        self.zone
    }

    /// The smallest tick strictly after `after`, or `None` once the schedule is exhausted
    /// (past `end_at`, past a one-time `@at`, or nothing before the end of 2199).
    ///
    /// Ticks are whole seconds. The planner asks `next_after(previous tick)`, never
    /// `next_after(now)`, so the sequence never drifts.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let after = match self.start_at {
            Some(start) if after < start => start - Duration::nanoseconds(1),
            _ => after,
        };
        // Whole seconds: a tick is strictly after `after` iff it is after its floor.
        let mut after_s = after.timestamp();
        for _ in 0..MAX_EXCLUDED_IN_A_ROW {
            let next = self.next_kept_by_days(after_s)?;
            let wall = dst::local(self.zone, next.timestamp())?;
            if self.exclusions.excludes(wall).is_none() {
                return Some(next);
            }
            after_s = match self.spec.rule {
                // Skip the rest of an excluded date at once.
                Rule::Every { .. } if self.exclusions.excludes_date(wall.date()) => {
                    last_second_of(self.zone, wall.date()).max(next.timestamp())
                }
                _ => next.timestamp(),
            };
        }
        None
    }

    /// The next tick after `after_s` on a date the exclusions and `roll` keep (cron), or the
    /// next tick (`@every`, `@at`), within the window and the horizon.
    fn next_kept_by_days(&self, after_s: i64) -> Option<DateTime<Utc>> {
        let next = match &self.spec.rule {
            Rule::Cron { calendar, kind, .. } => {
                let policy = dst::DstPolicy::of(*kind, self.dst_gap, self.dst_fold);
                let days = days::RolledDays {
                    exclusions: &self.exclusions,
                    roll: self.roll,
                };
                dst::next_tick(calendar, policy, &days, self.zone, after_s)
            }
            Rule::Every { seconds, .. } => Some(next_every(self.anchor, *seconds, after_s)),
            Rule::At { at } => (at.timestamp() > after_s).then_some(at.timestamp()),
            // A chained trigger fires after its parent's runs, never by the clock.
            Rule::After(_) => None,
        };
        let next = dst::instant(next?)?;
        let within_end = self.end_at.is_none_or(|end| next <= end);
        let within_horizon = match self.spec.rule {
            // A wall time late in 2199 may be an instant early in 2200 UTC.
            Rule::Cron { .. } => true,
            Rule::Every { .. } | Rule::At { .. } | Rule::After(_) => next.year() <= HORIZON_YEAR,
        };
        (within_end && within_horizon).then_some(next)
    }

    /// The exclusions it applies.
    pub fn exclusions(&self) -> &Exclusions {
        &self.exclusions
    }

    /// The first local date, from the date of `from` until 366 days past the last date the
    /// exclusions list (at least a year), on which a tick would need rolling but finds no
    /// free date within [`MAX_ROLL_DAYS`]; `None` when every such tick rolls (or nothing
    /// rolls: `roll: none`, or not a cron spec).
    pub fn unrollable_date(&self, from: DateTime<Utc>) -> Option<NaiveDate> {
        let Rule::Cron { calendar, .. } = &self.spec.rule else {
            return None;
        };
        if self.roll == Roll::None || self.exclusions.is_empty() {
            return None;
        }
        let first = dst::local(self.zone, from.timestamp())?.date();
        let last = self
            .exclusions
            .last_listed_date()
            .map_or(first, |listed| listed.max(first))
            + Duration::days(MAX_ROLL_DAYS);
        let days = days::RolledDays {
            exclusions: &self.exclusions,
            roll: self.roll,
        };
        let mut date = first;
        while date <= last && date.year() <= HORIZON_YEAR {
            date = calendar.first_matching_day(date)?;
            if date > last {
                return None;
            }
            if days.target(date).is_none() {
                return Some(date);
            }
            date = date.succ_opt()?;
        }
        None
    }

    /// The first tick at or after `at` (for "from now on, including now").
    pub fn first_at_or_after(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.next_after(at - Duration::nanoseconds(1))
    }

    /// The ticks strictly after `after`, in order, ending when the schedule is exhausted.
    pub fn ticks_after(&self, after: DateTime<Utc>) -> Ticks<'_> {
        Ticks {
            timetable: self,
            last: Some(after),
        }
    }
}

/// The smallest gap a spec leaves between two consecutive ticks; see
/// [`Timetable::min_gap`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinGap {
    /// The gap, measured on the wall clock of the timetable's zone.
    pub gap: Duration,
    /// The first tick of the first pair that far apart, as wall time in the zone.
    pub earlier: NaiveDateTime,
    /// The tick after it, as wall time in the zone.
    pub later: NaiveDateTime,
}

impl Timetable {
    /// A lower bound of [`Timetable::min_gap`] found without searching the calendar, so a
    /// limit the bound meets is met by every gap (`None` when the spec has no gap: `@at`,
    /// `@after`, or a cron expression matching no time of day). `min_gap` walks every
    /// matching day to 2199 unless two consecutive days match: about 2.5 ms for a weekly
    /// expression, so checking 10,000 of them in one deploy against `min_interval` took 25 s.
    pub fn min_gap_floor(&self) -> Option<Duration> {
        match &self.spec.rule {
            Rule::Cron { calendar, .. } => calendar.gap_floor().map(Duration::seconds),
            Rule::Every { seconds, .. } => Some(Duration::seconds(*seconds)),
            Rule::At { .. } | Rule::After(_) => None,
        }
    }

    /// The smallest gap between two consecutive ticks of the spec from `from` on, with the
    /// first pair of ticks that close (as wall times in the zone); `None` when the spec
    /// fires at most once (`@at`, or a cron matching one wall time before 2200).
    ///
    /// Exact for cron: every time of day a matching day has is considered, and the gap
    /// across midnight only counts when matching days actually come that close (so
    /// `0 23,1 * * MON` has a 22 h minimum gap, `0 23,1 * * *` a 2 h one). `@every d` is `d`.
    /// The window (`start_at`/`end_at`) is not applied: this is a property of the spec.
    ///
    /// DST: cron gaps are wall-clock gaps, the same in every zone. A transition can make
    /// one real gap shorter than that, by at most the size of the transition: a fixed-time
    /// tick moved to the instant the clocks jumped, `0 1,3 * * *` being one real hour apart
    /// on the day clocks spring forward, or a wildcard job restarting its minutes in the
    /// replayed hour of a fall back. Those are one-off shortenings a few times a year, not
    /// the rate a spec fires at; a limit such as `min_interval` that counted them would
    /// accept or refuse the same spec depending on the zone, so they are deliberately left
    /// out.
    pub fn min_gap(&self, from: DateTime<Utc>) -> Option<MinGap> {
        let wall = |seconds: i64| {
            DateTime::from_timestamp(seconds, 0)
                .map(|at| at.with_timezone(&self.zone).naive_local())
        };
        match &self.spec.rule {
            Rule::Cron { calendar, .. } => {
                let from = from.with_timezone(&self.zone).naive_local();
                let WallGap {
                    seconds,
                    earlier,
                    later,
                } = calendar.min_gap(from)?;
                Some(MinGap {
                    gap: Duration::seconds(seconds),
                    earlier,
                    later,
                })
            }
            Rule::Every { seconds, .. } => {
                let first = next_every(self.anchor, *seconds, from.timestamp() - 1);
                Some(MinGap {
                    gap: Duration::seconds(*seconds),
                    earlier: wall(first)?,
                    later: wall(first + seconds)?,
                })
            }
            Rule::At { .. } | Rule::After(_) => None,
        }
    }
}

/// The last epoch second whose wall time in `zone` is on `date` (or before it).
fn last_second_of(zone: Tz, date: NaiveDate) -> i64 {
    let Some(next_midnight) = date.succ_opt().map(|d| d.and_time(chrono::NaiveTime::MIN)) else {
        return i64::MAX;
    };
    let guess = next_midnight.and_utc().timestamp();
    // Offsets stay within ±26 h; find the first instant whose wall time reaches midnight.
    let (mut lo, mut hi) = (guess - 26 * 3_600, guess + 26 * 3_600);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match dst::local(zone, mid) {
            Some(wall) if wall < next_midnight => lo = mid,
            _ => hi = mid,
        }
    }
    lo
}

/// `anchor + k * period` for the smallest `k >= 0` that is strictly after `after`.
fn next_every(anchor: i64, period: i64, after: i64) -> i64 {
    if after < anchor {
        return anchor;
    }
    let periods = (after - anchor) / period + 1;
    anchor + periods * period
}

/// Iterator over successive ticks; see [`Timetable::ticks_after`].
#[derive(Debug)]
pub struct Ticks<'a> {
    timetable: &'a Timetable,
    last: Option<DateTime<Utc>>,
}

impl Iterator for Ticks<'_> {
    type Item = DateTime<Utc>;

    fn next(&mut self) -> Option<DateTime<Utc>> {
        let next = self.timetable.next_after(self.last?);
        self.last = next;
        next
    }
}
