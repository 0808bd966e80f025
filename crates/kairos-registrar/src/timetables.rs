//! A stored schedule's timetable (its spec, zone, window and calendars, as the planner
//! builds it) and what it says next: where a preview starts, which of the next ticks are
//! skipped, and the schedule's next fire.

use chrono::{DateTime, Utc};
use kairos_core::{Schedule, Skip, Timetable};
use kairos_store::timing::Decoder;
use kairos_store::{skips, Tx};

use crate::error::Result;
use crate::rules;

/// How many ticks past a pause's end the next fire is looked for among skips.
const NEXT_FIRE_TICKS: usize = 64;

/// The timetable of a stored schedule with its exclusions (its calendars loaded in `tx`);
/// `None` if its spec or zone no longer parses (a core change) or a calendar it names is
/// gone: such a schedule previews and plans nothing rather than failing every read.
///
/// # Errors
/// [`Error::Store`].
pub(crate) async fn timetable_of(tx: &mut Tx, schedule: &Schedule) -> Result<Option<Timetable>> {
    let calendars = rules::load(tx, &schedule.rules.exclude_calendars).await?;
    Ok(timetable_with(schedule, &calendars))
}

/// [`timetable_of`] with the calendars already loaded: the same timetable the planner
/// builds ([`kairos_core::ScheduleRules::timetable`]).
pub(crate) fn timetable_with(
    schedule: &Schedule,
    calendars: &rules::Calendars,
) -> Option<Timetable> {
    Decoder::default()
        .schedule(schedule)
        .ok()?
        .timetable(calendars)
        .ok()
}

/// Where a schedule's preview starts: now, or the end of its pause when it is paused until
/// a later time (nothing fires before).
pub(crate) fn preview_from(schedule: &Schedule, now: DateTime<Utc>) -> DateTime<Utc> {
    match schedule.paused_until.filter(|_| schedule.paused) {
        Some(until) => until.max(now),
        None => now,
    }
}

/// The skips of `schedule_id` among `ticks` (a preview's), in tick order.
///
/// # Errors
/// [`Error::Store`].
pub(crate) async fn among(
    tx: &mut Tx,
    schedule_id: &str,
    ticks: &[DateTime<Utc>],
) -> Result<Vec<Skip>> {
    let ids = vec![schedule_id.to_string(); ticks.len()];
    let mut found = skips::of_ticks(&mut **tx, &ids, ticks).await?;
    found.sort_by_key(|skip| skip.run_at);
    Ok(found)
}

/// The schedule's next fire at or after `now`, one rule everywhere it is shown: none while
/// it is paused without an end, once it is exhausted or has no timetable (chained, or a
/// spec that no longer parses); else the first tick at or after the end of its pause (or
/// `now`) that is not skipped, its calendars applied. Skips are looked for among the next
/// [`NEXT_FIRE_TICKS`] ticks; a schedule with every one of them skipped has none shown.
///
/// # Errors
/// [`crate::Error::Store`].
pub(crate) async fn next_fire(
    tx: &mut Tx,
    schedule: &Schedule,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>> {
    let fires = next_fires(tx, std::slice::from_ref(schedule), now).await?;
    Ok(fires.into_iter().next().flatten())
}

/// [`next_fire`] of each of `schedules`, in order: one query for the skips of their first
/// ticks, and one more per schedule whose first tick is skipped.
///
/// # Errors
/// [`crate::Error::Store`].
pub(crate) async fn next_fires(
    tx: &mut Tx,
    schedules: &[Schedule],
    now: DateTime<Utc>,
) -> Result<Vec<Option<DateTime<Utc>>>> {
    let mut firsts = Vec::with_capacity(schedules.len());
    for schedule in schedules {
        let ended = schedule.paused && schedule.paused_until.is_none();
        let first = match timetable_of(tx, schedule).await? {
            Some(timetable) if !ended && schedule.remaining_runs() != Some(0) => timetable
                .first_at_or_after(preview_from(schedule, now))
                .map(|first| (first, timetable)),
            _ => None,
        };
        firsts.push(first);
    }
    let (ids, ticks): (Vec<String>, Vec<DateTime<Utc>>) = schedules
        .iter()
        .zip(&firsts)
        .filter_map(|(schedule, first)| {
            first
                .as_ref()
                .map(|(tick, _)| (schedule.schedule_id.clone(), *tick))
        })
        .unzip();
    let skipped = skips::of_ticks(&mut **tx, &ids, &ticks).await?;
    let mut fires = Vec::with_capacity(schedules.len());
    for (schedule, first) in schedules.iter().zip(firsts) {
        let fire = match first {
            None => None,
            Some((tick, timetable)) => {
                let is_skipped = skipped
                    .iter()
                    .any(|skip| skip.schedule_id == schedule.schedule_id && skip.run_at == tick);
                if is_skipped {
                    first_not_skipped(tx, schedule, &timetable, tick).await?
                } else {
                    Some(tick)
                }
            }
        };
        fires.push(fire);
    }
    Ok(fires)
}

/// The first tick of `timetable` from `first` (a tick of it) that has no skip.
async fn first_not_skipped(
    tx: &mut Tx,
    schedule: &Schedule,
    timetable: &Timetable,
    first: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>> {
    let ticks: Vec<DateTime<Utc>> = std::iter::once(first)
        .chain(timetable.ticks_after(first))
        .take(NEXT_FIRE_TICKS)
        .collect();
    let skipped = among(tx, &schedule.schedule_id, &ticks).await?;
    Ok(ticks
        .into_iter()
        .find(|tick| !skipped.iter().any(|skip| skip.run_at == *tick)))
}
