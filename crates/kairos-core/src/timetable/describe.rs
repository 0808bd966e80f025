//! Each upcoming time explained for previews ([`Timetable::describe`]): its wall time in the
//! zone and UTC offset, the DST rule or roll that placed it ([`TickNote`]), the jitter a
//! schedule's run of it gets; and the times the `[start_at, end_at]` window removes
//! ([`Timetable::outside_window`]). Never consulted by the planner.

use chrono::{DateTime, Duration, NaiveDateTime, Offset, TimeZone, Utc};

use super::{TickNote, Timetable};
use crate::{jitter_offset, RunKey};

/// One upcoming time, explained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickExplained {
    /// The tick (the run's `run_at`).
    pub at: DateTime<Utc>,
    /// Its wall time in the schedule's zone.
    pub wall: NaiveDateTime,
    /// The zone's offset from UTC at that instant, in seconds (east positive).
    pub utc_offset_s: i32,
    /// Rolled, DST gap shift, or which pass of a repeated hour.
    pub note: TickNote,
    /// How far jitter moves the run (zero without jitter).
    pub jitter: Duration,
    /// When the run would be dispatched: `at + jitter`.
    pub fire_at: DateTime<Utc>,
}

impl TickExplained {
    /// The offset as `+HH:MM` / `-HH:MM`.
    pub fn utc_offset(&self) -> String {
        let sign = if self.utc_offset_s < 0 { '-' } else { '+' };
        let minutes = self.utc_offset_s.unsigned_abs() / 60;
        format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60)
    }
}

/// Which end of the window removed a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSide {
    /// Before `start_at`.
    BeforeStart,
    /// After `end_at`.
    AfterEnd,
}

impl WindowSide {
    /// As shown in previews.
    pub fn as_str(self) -> &'static str {
        match self {
            WindowSide::BeforeStart => "before start_at",
            WindowSide::AfterEnd => "after end_at",
        }
    }
}

/// A time the spec has but the window removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutsideWindow {
    /// The time.
    pub at: DateTime<Utc>,
    /// Which end of the window removed it.
    pub side: WindowSide,
}

impl Timetable {
    /// `tick` explained; `jitter` is the schedule id and jitter bound its runs use (the
    /// offset comes from the run key, as the planner computes it).
    pub fn describe(&self, tick: DateTime<Utc>, jitter: Option<(&str, u32)>) -> TickExplained {
        let local = self.zone.from_utc_datetime(&tick.naive_utc());
        let jitter = match jitter {
            Some((schedule_id, jitter_ms)) if jitter_ms > 0 => {
                jitter_offset(&RunKey::tick(schedule_id, tick), jitter_ms)
            }
            _ => Duration::zero(),
        };
        TickExplained {
            at: tick,
            wall: local.naive_local(),
            utc_offset_s: local.offset().fix().local_minus_utc(),
            note: self.explain(tick),
            jitter,
            fire_at: tick + jitter,
        }
    }

    /// The times strictly after `after` that the spec (with its exclusions and DST rules)
    /// has but the window removes: those before `start_at` (at most `limit`) and the first
    /// one after `end_at`.
    pub fn outside_window(&self, after: DateTime<Utc>, limit: usize) -> Vec<OutsideWindow> {
        let mut open = self.clone();
        open.start_at = None;
        open.end_at = None;
        let mut outside: Vec<OutsideWindow> = match self.start_at {
            Some(start) if after < start => open
                .ticks_after(after)
                .take_while(|at| *at < start)
                .take(limit)
                .map(|at| OutsideWindow {
                    at,
                    side: WindowSide::BeforeStart,
                })
                .collect(),
            _ => Vec::new(),
        };
        if let Some(end) = self.end_at {
            if let Some(at) = open.next_after(end.max(after)) {
                outside.push(OutsideWindow {
                    at,
                    side: WindowSide::AfterEnd,
                });
            }
        }
        outside
    }
}
