//! Why a timetable has the ticks it has, for previews: which times its exclusions removed
//! ([`Timetable::excluded_between`]), and for one tick whether it was rolled and which DST
//! rule placed it ([`Timetable::explain`]). Never consulted by the planner.

use chrono::{DateTime, Duration, LocalResult, NaiveDateTime, TimeZone, Utc};

use super::{days::RolledDays, dst, Timetable};
use crate::exclusion::{ExcludedBy, Exclusions};
use crate::spec::Rule;
use crate::{DstFold, DstGap, JobKind, Roll};

/// A time the exclusions removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excluded {
    /// The instant it would have fired at.
    pub at: DateTime<Utc>,
    /// What removed it.
    pub by: ExcludedBy,
}

/// Where a DST rule came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleSource {
    /// The schedule's own `dst_gap`/`dst_fold`.
    Schedule,
    /// docs/design.md §4 for fixed-time jobs.
    FixedTimeDefault,
    /// docs/design.md §4 for wildcard jobs.
    WildcardDefault,
}

impl RuleSource {
    /// As shown in previews.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleSource::Schedule => "schedule",
            RuleSource::FixedTimeDefault => "default for fixed-time jobs",
            RuleSource::WildcardDefault => "default for wildcard jobs",
        }
    }
}

/// Which occurrence of a repeated wall time a tick is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Occurrence {
    /// The first (before the clocks went back).
    First,
    /// The second (after).
    Second,
}

/// How a DST rule placed a tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DstNote {
    /// The wall time `wall` did not exist; `dst_gap=shift` fired it when the clocks jumped.
    Shifted {
        /// The wall time that did not exist.
        wall: NaiveDateTime,
        /// Where the rule came from.
        source: RuleSource,
    },
    /// The wall time happened twice; `dst_fold` fired this occurrence.
    Fold {
        /// This tick's occurrence.
        occurrence: Occurrence,
        /// The rule applied.
        fold: DstFold,
        /// Where the rule came from.
        source: RuleSource,
    },
}

/// What a preview says about one tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickNote {
    /// The tick.
    pub at: DateTime<Utc>,
    /// The instant of the excluded tick this one was rolled from.
    pub rolled_from: Option<DateTime<Utc>>,
    /// The DST rule that placed it, when one did.
    pub dst: Option<DstNote>,
}

impl TickNote {
    /// True when there is nothing to say.
    pub fn is_plain(&self) -> bool {
        self.rolled_from.is_none() && self.dst.is_none()
    }
}

impl Timetable {
    /// The same timetable without exclusions or rolling.
    fn unexcluded(&self) -> Timetable {
        self.clone().exclude(Exclusions::default()).roll(Roll::None)
    }

    /// The ticks in `(after, until]` that the exclusions removed (rolled ticks are moved,
    /// not removed), at most `limit`.
    pub fn excluded_between(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: usize,
    ) -> Vec<Excluded> {
        if self.exclusions.is_empty() {
            return Vec::new();
        }
        let plain = self.unexcluded();
        let days = RolledDays {
            exclusions: &self.exclusions,
            roll: self.roll,
        };
        let rolls = matches!(self.spec.rule, Rule::Cron { .. }) && self.roll != Roll::None;
        plain
            .ticks_after(after)
            .take_while(|at| *at <= until)
            .take(limit.saturating_mul(1_000).max(10_000))
            .filter_map(|at| {
                let wall = dst::local(self.zone, at.timestamp())?;
                let by = self.exclusions.excludes(wall)?;
                let moved = rolls
                    && self.exclusions.date_excluded(wall.date()).is_some()
                    && days.target(wall.date()).is_some();
                (!moved).then_some(Excluded { at, by })
            })
            .take(limit)
            .collect()
    }

    /// Whether `tick` was rolled and which DST rule placed it.
    pub fn explain(&self, tick: DateTime<Utc>) -> TickNote {
        let mut note = TickNote {
            at: tick,
            rolled_from: None,
            dst: None,
        };
        let Rule::Cron { calendar, kind, .. } = &self.spec.rule else {
            return note;
        };
        let Some(wall) = dst::local(self.zone, tick.timestamp()) else {
            return note;
        };
        let policy = dst::DstPolicy::of(*kind, self.dst_gap, self.dst_fold);
        let default_source = match kind {
            JobKind::FixedTime => RuleSource::FixedTimeDefault,
            JobKind::Wildcard => RuleSource::WildcardDefault,
        };
        if self.roll != Roll::None && !calendar.day_matches(wall.date()) {
            let step = if self.roll == Roll::Forward { -1 } else { 1 };
            let origin = (1..=super::MAX_ROLL_DAYS)
                .map(|n| wall.date() + Duration::days(n * step))
                .take_while(|date| self.exclusions.excludes_date(*date))
                .find(|date| calendar.day_matches(*date));
            note.rolled_from =
                origin.and_then(|date| self.instant_of(date.and_time(wall.time()), policy.fold));
        }
        let source = |own: bool| {
            if own {
                RuleSource::Schedule
            } else {
                default_source
            }
        };
        match self.zone.from_local_datetime(&wall) {
            LocalResult::Ambiguous(first, _) => {
                let occurrence = if first == tick {
                    Occurrence::First
                } else {
                    Occurrence::Second
                };
                note.dst = Some(DstNote::Fold {
                    occurrence,
                    fold: policy.fold,
                    source: source(self.dst_fold.is_some()),
                });
            }
            _ if policy.gap == DstGap::Shift => {
                // A jump instant fired for a wall time inside the gap just before it.
                let before = dst::local(self.zone, tick.timestamp() - 1);
                let gap_wall = before
                    .filter(|before| wall - *before > Duration::seconds(1))
                    .and_then(|before| calendar.first_at_or_after(before + Duration::seconds(1)))
                    .filter(|gap_wall| *gap_wall < wall && gap_wall.date() == wall.date());
                if let Some(gap_wall) = gap_wall {
                    note.dst = Some(DstNote::Shifted {
                        wall: gap_wall,
                        source: source(self.dst_gap.is_some()),
                    });
                }
            }
            _ => {}
        }
        note
    }

    /// The instant of `wall` under the fold rule (a gap wall time: the jump).
    fn instant_of(&self, wall: NaiveDateTime, fold: DstFold) -> Option<DateTime<Utc>> {
        match self.zone.from_local_datetime(&wall) {
            LocalResult::Single(at) => Some(at.with_timezone(&Utc)),
            LocalResult::Ambiguous(first, second) => Some(match fold {
                DstFold::Last => second.with_timezone(&Utc),
                DstFold::First | DstFold::Both => first.with_timezone(&Utc),
            }),
            LocalResult::None => dst::instant(dst::jump_instant(self.zone, wall)?),
        }
    }
}
