//! The ticks of paused schedules with a deadline (a tick that never launched
//! because its schedule is paused is late once its deadline passes, even while nobody has
//! resumed it). [`record_paused_ticks`], called by the sweep on the database clock, writes
//! each such tick, once it has come, as a `SKIPPED` run whose reason names the pause
//! ("paused by <who>: <note>") and whose deadline is `run_at + deadline_s`; the sweep's
//! judge then marks it late at its deadline. The rows are marked `paused_skip`: if a resume
//! plans the tick after all (a pause that ended by itself and is caught up per the catch-up
//! policy, as a resume then would), the planner turns the row into that run.
//!
//! A resume writes the same way the paused ticks before the time it plans from that no
//! sweep wrote yet (`record_before_resume`, in the resume's transaction).
//!
//! A paused schedule's `next_run_at` is the first tick it has no run for; a pass writes the
//! ticks from there up to now and moves it past them (a resume recomputes it anyway). Bounds
//! per pass: [`PAUSED_SCHEDULES_PER_PASS`] schedules, and per schedule the newest
//! [`kairos_core::MAX_DROPPED_KEPT`] ticks of at most [`kairos_core::MAX_MISSED_ENUMERATED`]
//! enumerated (older ones get no row, as the planner counts but does not write them).

use std::collections::VecDeque;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use kairos_core::{
    paused_reason, Calendars, NamedCalendar, RunKey, Schedule, Timetable, MAX_DROPPED_KEPT,
    MAX_MISSED_ENUMERATED,
};
use kairos_store::calendars;
use kairos_store::planning::{self, Advances};
use kairos_store::unlaunched::{self, SkippedTicks};
use kairos_store::Tx;

use crate::error::Result;
use crate::timetables::timetable_with;

/// Paused schedules whose ticks one pass writes at most.
pub const PAUSED_SCHEDULES_PER_PASS: i64 = 50;

/// What one [`record_paused_ticks`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PausedTicks {
    /// Paused schedules claimed: [`PAUSED_SCHEDULES_PER_PASS`] means there may be more.
    pub schedules: usize,
    /// `SKIPPED` runs written.
    pub written: u64,
}

/// Writes, in the caller's transaction, the ticks up to `now` (the database clock) of up to
/// `limit` paused schedules with a deadline as `SKIPPED` runs (see the module docs). Each
/// schedule is locked `FOR UPDATE SKIP LOCKED` and its `next_run_at` moved past the ticks
/// written, so several sweepers write each tick once; keys already stored are left alone.
/// A schedule whose stored timing no longer builds a timetable is parked as the planner
/// parks it (`next_run_at` NULL, `planner_error` set).
///
/// # Errors
/// [`crate::Error::Store`] when a statement fails (the caller's transaction rolls back).
pub async fn record_paused_ticks(
    tx: &mut Tx,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<PausedTicks> {
    let paused = unlaunched::claim_paused(&mut **tx, now, limit).await?;
    let calendars = calendars_of(tx, &paused).await?;
    let mut ticks = SkippedTicks::default();
    let mut advances = Advances::default();
    for schedule in &paused {
        let Some(from) = schedule.next_run_at else {
            continue;
        };
        let Some(timetable) = timetable_with(schedule, &calendars) else {
            let why = "the stored timing no longer builds a timetable".to_string();
            advances.push(&schedule.schedule_id, None, 0, Some(why));
            continue;
        };
        let (due, next) = ticks_through(&timetable, from, Bound::Through(now));
        let reason = paused_reason(
            schedule.paused_by.as_deref(),
            schedule.pause_note.as_deref(),
        );
        for run_at in due {
            let key = RunKey::tick(&schedule.schedule_id, run_at);
            ticks.push(key.as_str(), &schedule.schedule_id, run_at, &reason);
        }
        advances.push(&schedule.schedule_id, next, 0, None);
    }
    let written = unlaunched::insert_skipped(&mut **tx, &ticks, true, now).await?;
    planning::advance(&mut **tx, &advances).await?;
    if written > 0 {
        tracing::info!(
            written,
            "ticks of paused schedules with a deadline written SKIPPED"
        );
    }
    Ok(PausedTicks {
        schedules: paused.len(),
        written,
    })
}

/// The calendars `schedules` name, read in one statement without locking them (as the
/// planner reads them), so a sweep never waits on a calendar write.
async fn calendars_of(tx: &mut Tx, schedules: &[Schedule]) -> Result<Calendars> {
    let mut names: Vec<String> = schedules
        .iter()
        .flat_map(|s| s.rules.exclude_calendars.iter().cloned())
        .collect();
    names.sort();
    names.dedup();
    let dates = calendars::dates_of(&mut **tx, &names).await?;
    Ok(dates
        .into_iter()
        .filter_map(|(name, dates)| {
            let calendar = NamedCalendar::new(name.clone(), dates).ok()?;
            Some((name, Arc::new(calendar)))
        })
        .collect())
}

/// Writes, in a resume's transaction, the ticks of `stored` (paused, with a deadline) from
/// its `next_run_at` up to, not including, `resume_at` (where the resume plans from) that no
/// sweep has written yet, as [`record_paused_ticks`] would: a resume by hand right after a
/// tick, or after a span no sweep saw, leaves no tick of the pause without its run. Returns
/// the rows written.
///
/// # Errors
/// [`crate::Error::Store`] when the statement fails.
pub(crate) async fn record_before_resume(
    tx: &mut Tx,
    stored: &Schedule,
    timetable: &Timetable,
    resume_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<u64> {
    let from = match stored.next_run_at {
        Some(from) if stored.paused && stored.deadline_s.is_some() => from,
        _ => return Ok(0),
    };
    let (due, _) = ticks_through(timetable, from, Bound::Before(resume_at));
    let reason = paused_reason(stored.paused_by.as_deref(), stored.pause_note.as_deref());
    let mut ticks = SkippedTicks::default();
    for run_at in due {
        let key = RunKey::tick(&stored.schedule_id, run_at);
        ticks.push(key.as_str(), &stored.schedule_id, run_at, &reason);
    }
    Ok(unlaunched::insert_skipped(&mut **tx, &ticks, true, now).await?)
}

/// Where [`ticks_through`] stops.
#[derive(Debug, Clone, Copy)]
enum Bound {
    /// At this instant, included.
    Through(DateTime<Utc>),
    /// Before this instant.
    Before(DateTime<Utc>),
}

impl Bound {
    fn holds(self, tick: DateTime<Utc>) -> bool {
        match self {
            Bound::Through(last) => tick <= last,
            Bound::Before(end) => tick < end,
        }
    }

    /// The first tick past the bound.
    fn next(self, timetable: &Timetable) -> Option<DateTime<Utc>> {
        match self {
            Bound::Through(last) => timetable.next_after(last),
            Bound::Before(end) => timetable.first_at_or_after(end),
        }
    }
}

/// The ticks from `from` (a tick) within `bound`: the newest [`MAX_DROPPED_KEPT`] of at
/// most [`MAX_MISSED_ENUMERATED`] enumerated (past that, the rest are passed over, as the
/// planner passes them), and the first tick after them (`None`: no more ticks).
fn ticks_through(
    timetable: &Timetable,
    from: DateTime<Utc>,
    bound: Bound,
) -> (VecDeque<DateTime<Utc>>, Option<DateTime<Utc>>) {
    let mut kept = VecDeque::new();
    let mut tick = timetable.first_at_or_after(from);
    let mut enumerated = 0u64;
    while let Some(run_at) = tick.filter(|t| bound.holds(*t)) {
        enumerated += 1;
        if enumerated > MAX_MISSED_ENUMERATED {
            tick = bound.next(timetable);
            break;
        }
        if kept.len() == MAX_DROPPED_KEPT {
            kept.pop_front();
        }
        kept.push_back(run_at);
        tick = timetable.next_after(run_at);
    }
    (kept, tick)
}
