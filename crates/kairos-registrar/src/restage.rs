//! A dispatcher round's side of a schedule write. A write never waits for a round: it skips
//! the runs a round holds locked (a round holds its pre-staged runs until their tick), so
//! such a run still carries the schedule revision it was planned under. Before the round
//! publishes it, the round calls [`restage`], which does to it what the write would have
//! done: cancelled when its schedule is gone or paused or its tick left the timetable, else
//! kept at the schedule's new revision with the `fire_at` of the current jitter and the
//! workflow, version and user the schedule launches now, unless its tick was skipped
//! meanwhile (`SKIPPED`, with the skip's reason).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use kairos_core::{jitter_offset, RunKey, RunSource, Schedule};
use kairos_store::dispatch::Claimed;
use kairos_store::schedules;
use kairos_store::{runs, skips, Tx};

use crate::apply::RESCHEDULED;
use crate::checks::{DELETED, PAUSED};
use crate::error::Result;
use crate::rules;
use crate::timetables::timetable_with;

/// A run [`restage`] kept: when it fires and what it launches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restaged {
    /// Its `fire_at`.
    pub fire_at: DateTime<Utc>,
    /// The workflow it launches.
    pub workflow_id: String,
    /// That workflow's version.
    pub version: i32,
    /// The user it launches as.
    pub user_id: String,
}

/// Brings `left_behind` (runs this transaction holds, whose schedule changed since they
/// were checked) in line with their schedules as they are now. Answers each run kept, by
/// key; a run not in the answer was cancelled. A tick before the schedule's last write
/// (`updated_at`) is kept as it was, as that write would have kept it.
///
/// # Errors
/// [`crate::Error::Store`].
pub async fn restage(
    tx: &mut Tx,
    left_behind: &[Claimed],
    now: DateTime<Utc>,
) -> Result<HashMap<String, Restaged>> {
    if left_behind.is_empty() {
        return Ok(HashMap::new());
    }
    let mut ids: Vec<String> = left_behind.iter().map(|r| r.schedule_id.clone()).collect();
    ids.sort();
    ids.dedup();
    let stored: HashMap<String, Schedule> = schedules::get_many(&mut **tx, &ids)
        .await?
        .into_iter()
        .map(|s| (s.schedule_id.clone(), s))
        .collect();
    let mut names: Vec<String> = stored
        .values()
        .flat_map(|s| s.rules.exclude_calendars.iter().cloned())
        .collect();
    names.sort();
    names.dedup();
    let calendars = rules::load(tx, &names).await?;
    let mut kept: HashMap<String, Restaged> = HashMap::new();
    let mut following = Vec::new();
    let mut cancelled: HashMap<&str, Vec<String>> = HashMap::new();
    for run in left_behind {
        let key = run.idempotency_key.clone();
        let cancel = match stored.get(&run.schedule_id) {
            None => Some(DELETED),
            Some(schedule) if schedule.paused => Some(PAUSED),
            Some(schedule)
                if run.source != RunSource::Schedule || run.run_at < schedule.updated_at =>
            {
                let as_it_was = Restaged {
                    fire_at: run.fire_at,
                    workflow_id: run.workflow_id.clone(),
                    version: run.version,
                    user_id: run.user_id.clone(),
                };
                kept.insert(key, as_it_was);
                None
            }
            Some(schedule) => {
                let still_a_tick = timetable_with(schedule, &calendars)
                    .is_some_and(|t| t.first_at_or_after(run.run_at) == Some(run.run_at));
                if still_a_tick {
                    let jitter = u32::try_from(schedule.jitter_ms).unwrap_or(0);
                    let tick = RunKey::tick(&run.schedule_id, run.run_at);
                    let current = Restaged {
                        fire_at: run.run_at + jitter_offset(&tick, jitter),
                        workflow_id: schedule.workflow_id.clone(),
                        version: schedule.version,
                        user_id: schedule.user_id.clone(),
                    };
                    kept.insert(key.clone(), current);
                    following.push(key);
                    None
                } else {
                    Some(RESCHEDULED)
                }
            }
        };
        if let Some(reason) = cancel {
            cancelled
                .entry(reason)
                .or_default()
                .push(run.idempotency_key.clone());
        }
    }
    skip_kept(tx, left_behind, &mut kept, now).await?;
    following.retain(|key| kept.contains_key(key));
    let (keys, fire_ats): (Vec<String>, Vec<DateTime<Utc>>) =
        kept.iter().map(|(k, run)| (k.clone(), run.fire_at)).unzip();
    runs::keep_planned(&mut **tx, &keys, &fire_ats, now).await?;
    runs::follow_schedule(&mut **tx, &following).await?;
    for (reason, keys) in cancelled {
        runs::cancel(&mut **tx, &keys, reason, now).await?;
    }
    Ok(kept)
}

/// Marks `SKIPPED` the kept tick runs whose tick an operator skipped while the round held
/// them (the skip could not mark them), and takes them out of `kept`.
async fn skip_kept(
    tx: &mut Tx,
    left_behind: &[Claimed],
    kept: &mut HashMap<String, Restaged>,
    now: DateTime<Utc>,
) -> Result<()> {
    let ticks: Vec<&Claimed> = left_behind
        .iter()
        .filter(|run| run.source == RunSource::Schedule && kept.contains_key(&run.idempotency_key))
        .collect();
    let ids: Vec<String> = ticks.iter().map(|run| run.schedule_id.clone()).collect();
    let run_ats: Vec<DateTime<Utc>> = ticks.iter().map(|run| run.run_at).collect();
    let found = skips::of_ticks(&mut **tx, &ids, &run_ats).await?;
    if found.is_empty() {
        return Ok(());
    }
    let (mut keys, mut reasons) = (Vec::new(), Vec::new());
    for run in ticks {
        let skip = found
            .iter()
            .find(|s| s.schedule_id == run.schedule_id && s.run_at == run.run_at);
        if let Some(skip) = skip {
            kept.remove(&run.idempotency_key);
            keys.push(run.idempotency_key.clone());
            reasons.push(skip.reason());
        }
    }
    skips::mark_runs_skipped(&mut **tx, &keys, &reasons, now).await?;
    Ok(())
}
