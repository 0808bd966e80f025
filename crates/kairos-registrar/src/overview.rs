//! Reads for the operator page (`/ui`): schedules with their next fire time and statistics,
//! one schedule with its next ticks explained (DST rule, jitter), the ticks a backfill would
//! create, and runs across schedules (newest, in flight). Nothing here writes.

use chrono::{DateTime, Duration, Utc};
use kairos_core::{jitter_offset, RunFilter, RunKey, RunStatus, Schedule, ScheduleStats, TickNote};
use kairos_store::overview;
use kairos_store::schedules::{self as store, ListFilter};
use kairos_store::stats;
use kairos_store::Tx;

use crate::checks::{check_id, check_limit, not_found};
use crate::runs::BACKFILL_MAX_TICKS;
use crate::timetables::timetable_of;
use crate::{Error, Registrar, Result, Run};

/// How many of each schedule's newest runs a listing's statistics look at (a page of 50
/// schedules reads at most 5,000 index entries).
pub const LIST_STATS_WINDOW: i64 = 100;

/// One schedule of a listing, with what an operator looks for first.
#[derive(Debug, Clone)]
pub struct ScheduleRow {
    /// The schedule as stored.
    pub schedule: Schedule,
    /// Its next tick at or after now (`None`: exhausted, or its spec no longer parses).
    pub next_fire: Option<DateTime<Utc>>,
    /// Its last outcome, skipped and missed counts (over its newest [`LIST_STATS_WINDOW`]
    /// runs).
    pub stats: ScheduleStats,
}

/// A page of [`ScheduleRow`]s.
#[derive(Debug, Clone)]
pub struct RowPage {
    /// The rows, in `schedule_id` order.
    pub rows: Vec<ScheduleRow>,
    /// Pass as the next filter's `after` for the next page.
    pub next_cursor: Option<String>,
    /// The instant "next" was computed from.
    pub now: DateTime<Utc>,
}

/// One upcoming tick, explained.
#[derive(Debug, Clone)]
pub struct Upcoming {
    /// The planned tick (the run's `run_at`).
    pub at: DateTime<Utc>,
    /// When it fires: the tick plus the schedule's deterministic jitter.
    pub fire_at: DateTime<Utc>,
    /// The DST rule or roll that placed it, if any.
    pub note: TickNote,
    /// Its skip, when an operator skipped it (it will not run).
    pub skip: Option<kairos_core::Skip>,
}

/// One schedule with everything its page shows.
#[derive(Debug, Clone)]
pub struct ScheduleDetail {
    /// The schedule as stored.
    pub schedule: Schedule,
    /// Its next ticks (at most the count asked for).
    pub upcoming: Vec<Upcoming>,
    /// Its statistics (last outcome, why the last tick did not launch).
    pub stats: ScheduleStats,
    /// The instant "next" was computed from.
    pub now: DateTime<Utc>,
}

/// The ticks a backfill of a range would write runs for.
#[derive(Debug, Clone)]
pub struct BackfillPlan {
    /// The first ticks of the range (at most the count asked for).
    pub ticks: Vec<DateTime<Utc>>,
    /// How many ticks the range holds (capped at one past [`BACKFILL_MAX_TICKS`]).
    pub total: usize,
}

impl Registrar {
    /// A page of schedules matching `filter`, each with its next tick and statistics.
    ///
    /// # Errors
    /// As [`Registrar::list`].
    pub async fn schedule_rows(&self, filter: &ListFilter) -> Result<RowPage> {
        let page = self.list(filter).await?;
        let mut tx = Tx::begin(self.pool()).await?;
        let now = self.now(&mut tx).await?;
        let ids: Vec<String> = page
            .schedules
            .iter()
            .map(|s| s.schedule_id.clone())
            .collect();
        let all_stats = stats::for_schedules(&mut *tx, &ids, LIST_STATS_WINDOW).await?;
        let mut rows = Vec::with_capacity(page.schedules.len());
        let listed = page.schedules.into_iter().zip(page.next_fires);
        for ((schedule, next_fire), stats) in listed.zip(all_stats) {
            rows.push(ScheduleRow {
                schedule,
                next_fire,
                stats,
            });
        }
        Ok(RowPage {
            rows,
            next_cursor: page.next_cursor,
            now,
        })
    }

    /// A schedule with its next `count` ticks explained and its statistics.
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`Error::Store`].
    pub async fn schedule_detail(&self, schedule_id: &str, count: usize) -> Result<ScheduleDetail> {
        check_id(schedule_id)?;
        let mut tx = Tx::begin(self.pool()).await?;
        let now = self.now(&mut tx).await?;
        let schedule = store::get(&mut *tx, schedule_id)
            .await?
            .ok_or_else(|| not_found(schedule_id))?;
        let jitter = u32::try_from(schedule.jitter_ms).unwrap_or(0);
        let from = crate::timetables::preview_from(&schedule, now);
        let mut upcoming: Vec<Upcoming> = match timetable_of(&mut tx, &schedule).await? {
            Some(timetable) => {
                let first = timetable.first_at_or_after(from);
                let rest = first.into_iter().flat_map(|t| timetable.ticks_after(t));
                first
                    .into_iter()
                    .chain(rest)
                    .take(count)
                    .map(|at| Upcoming {
                        at,
                        fire_at: at + jitter_offset(&RunKey::tick(schedule_id, at), jitter),
                        note: timetable.explain(at),
                        skip: None,
                    })
                    .collect()
            }
            None => Vec::new(),
        };
        let ticks: Vec<DateTime<Utc>> = upcoming.iter().map(|tick| tick.at).collect();
        for skip in crate::timetables::among(&mut tx, schedule_id, &ticks).await? {
            if let Some(tick) = upcoming.iter_mut().find(|tick| tick.at == skip.run_at) {
                tick.skip = Some(skip);
            }
        }
        let stats = stats::for_schedule(&mut *tx, schedule_id, stats::DEFAULT_WINDOW).await?;
        Ok(ScheduleDetail {
            schedule,
            upcoming,
            stats,
            now,
        })
    }

    /// The ticks in `[from, to]` a backfill of the schedule would write runs for (those
    /// that already have one are left alone by the backfill); nothing stored.
    ///
    /// # Errors
    /// [`Error::Invalid`] when `to` is before `from`; [`Error::NotFound`]; [`Error::Store`].
    pub async fn backfill_plan(
        &self,
        schedule_id: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        count: usize,
    ) -> Result<BackfillPlan> {
        check_id(schedule_id)?;
        if to < from {
            return Err(Error::invalid("to", "is before from"));
        }
        let mut tx = Tx::begin(self.pool()).await?;
        let schedule = store::get(&mut *tx, schedule_id)
            .await?
            .ok_or_else(|| not_found(schedule_id))?;
        let Some(timetable) = timetable_of(&mut tx, &schedule).await? else {
            return Ok(BackfillPlan {
                ticks: Vec::new(),
                total: 0,
            });
        };
        let first = timetable.first_at_or_after(from);
        let all: Vec<DateTime<Utc>> = first
            .into_iter()
            .chain(first.into_iter().flat_map(|t| timetable.ticks_after(t)))
            .take_while(|tick| *tick <= to)
            .take(BACKFILL_MAX_TICKS + 1)
            .collect();
        Ok(BackfillPlan {
            total: all.len(),
            ticks: all.into_iter().take(count).collect(),
        })
    }

    /// This instance's "now" (the database's clock, or the pinned one).
    ///
    /// # Errors
    /// [`Error::Store`].
    pub async fn clock(&self) -> Result<DateTime<Utc>> {
        let mut tx = Tx::begin(self.pool()).await?;
        self.now(&mut tx).await
    }

    /// The last day across all schedules, per hour (see [`overview::last_day`]), and the
    /// "now" it ends at.
    ///
    /// # Errors
    /// [`Error::Store`].
    pub async fn last_day(&self) -> Result<(Vec<overview::HourTotals>, DateTime<Utc>)> {
        let mut tx = Tx::begin(self.pool()).await?;
        let now = self.now(&mut tx).await?;
        Ok((overview::last_day(&mut *tx, now).await?, now))
    }

    /// The newest runs matching `filter` (its `limit` must be 1..=1000), and "now".
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad limit or id; [`Error::Store`].
    pub async fn recent_runs(&self, filter: &RunFilter) -> Result<(Vec<Run>, DateTime<Utc>)> {
        check_run_filter(filter)?;
        let mut tx = Tx::begin(self.pool()).await?;
        let now = self.now(&mut tx).await?;
        Ok((overview::recent_runs(&mut *tx, filter).await?, now))
    }

    /// Runs in flight matching `filter`, the longest in flight first, and "now" (so the
    /// caller can say for how long).
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad limit or id; [`Error::Store`].
    pub async fn in_flight(&self, filter: &RunFilter) -> Result<(Vec<Run>, DateTime<Utc>)> {
        check_run_filter(filter)?;
        let mut tx = Tx::begin(self.pool()).await?;
        let now = self.now(&mut tx).await?;
        Ok((overview::in_flight(&mut *tx, filter).await?, now))
    }
}

/// How long a run has been in flight at `now`: since it started, else since it was
/// published, else since its fire time.
pub fn in_flight_for(run: &Run, now: DateTime<Utc>) -> Duration {
    let since = run.started_at.or(run.published_at).unwrap_or(run.fire_at);
    now - since
}

/// Parses a run status named in a filter.
///
/// # Errors
/// [`Error::Invalid`] naming `status` and the allowed names.
pub fn run_status(text: &str) -> Result<RunStatus> {
    text.parse::<RunStatus>().map_err(|err| {
        Error::invalid(
            "status",
            format!(
                "{:?} is not a run status: use one of {}",
                err.value, err.allowed
            ),
        )
    })
}

fn check_run_filter(filter: &RunFilter) -> Result<()> {
    check_limit(filter.limit)?;
    for (field, value) in [
        ("schedule_id", &filter.schedule_id),
        ("workflow_id", &filter.workflow_id),
    ] {
        if let Some(value) = value {
            kairos_core::validate_id(field, value)
                .map_err(|e| Error::invalid(field, e.to_string()))?;
        }
    }
    Ok(())
}
