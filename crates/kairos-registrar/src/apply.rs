//! Turning checked inputs into writes: decide per schedule whether it is new, changed (and
//! whether its timetable changed) or unchanged, write in bulk with revision checks, and
//! reconcile the unpublished runs of every schedule whose timetable changed.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use kairos_core::RunStatus;
use kairos_core::{jitter_offset, RunKey, Schedule, Timetable};
use kairos_store::schedules;
use kairos_store::Tx;
use kairos_store::{calendars, runs};

use crate::error::{Error, Problem, Result};
use crate::input::{first_tick, Checked, Settings};

/// Reason written on runs cancelled because their tick left the timetable.
pub(crate) const RESCHEDULED: &str = "rescheduled: no longer a tick of the schedule";

/// What an upsert does to one schedule.
#[derive(Debug)]
pub(crate) enum Plan {
    /// Insert; reconcile runs left by an earlier schedule of the same id.
    New(Schedule, Timetable),
    /// Update with a revision check; `retime` when spec, zone, window or jitter changed;
    /// `reprioritize` when the priority changed (its runs not yet published follow it).
    Changed {
        write: Schedule,
        timetable: Timetable,
        retime: bool,
        reprioritize: bool,
    },
    /// Every field is as stored: no write, no new revision.
    Unchanged(Schedule),
}

impl Plan {
    pub(crate) fn schedule_id(&self) -> &str {
        match self {
            Plan::New(write, _) | Plan::Changed { write, .. } => &write.schedule_id,
            Plan::Unchanged(stored) => &stored.schedule_id,
        }
    }
}

/// Decides what to write for `checked` given the stored row (if any) and the database's now.
/// A changed timetable gets a new `next_run_at` (first tick at or after `max(now, start_at)`)
/// and must fire and respect `min_interval`; an unchanged one keeps the planner's progress.
pub(crate) fn plan(
    checked: &Checked,
    existing: Option<&Schedule>,
    now: DateTime<Utc>,
    settings: &Settings,
) -> std::result::Result<Plan, PlanError> {
    if let Some(expected) = checked.revision {
        match existing {
            Some(stored) if stored.revision == expected => {}
            Some(stored) => return Err(PlanError::Revision(stored.revision)),
            None => return Err(PlanError::Revision(0)),
        }
    }
    let created_at = existing.map_or(now, |stored| stored.created_at);
    let timetable = checked.timetable(created_at);
    let mut write = to_write(checked, existing, created_at);
    let exhausted = checked
        .max_runs
        .is_some_and(|max| existing.is_some_and(|stored| stored.scheduled_runs >= i64::from(max)));
    // A chained schedule (`@after`) has no ticks: its runs come from its parent's, so it
    // keeps next_run_at NULL and is never claimed by a planner.
    let first = |timetable: &Timetable| {
        if checked.spec.chain().is_some() || exhausted {
            return Ok(None);
        }
        first_tick(timetable, now, settings)
            .map(Some)
            .map_err(PlanError::Field)
    };
    let Some(stored) = existing else {
        write.next_run_at = first(&timetable)?;
        return Ok(Plan::New(write, timetable));
    };
    let timing = stored.cron_expr != write.cron_expr
        || stored.timezone != write.timezone
        || stored.start_at != write.start_at
        || stored.end_at != write.end_at
        || stored.rules != write.rules
        || stored.max_runs != write.max_runs;
    if timing {
        write.next_run_at = first(&timetable)?;
    }
    if write == *stored {
        return Ok(Plan::Unchanged(stored.clone()));
    }
    // What a run launches is copied into it when it is planned: a new workflow, version or
    // user must reach the runs planned ahead too, or they would launch the old one.
    let launch = stored.workflow_id != write.workflow_id
        || stored.version != write.version
        || stored.user_id != write.user_id;
    let retime = timing || stored.jitter_ms != write.jitter_ms || launch;
    let reprioritize = stored.priority != write.priority;
    Ok(Plan::Changed {
        write,
        timetable,
        retime,
        reprioritize,
    })
}

/// Why [`plan`] refused.
#[derive(Debug)]
pub(crate) enum PlanError {
    /// A field broke a rule that needs the clock (never fires, too frequent).
    Field(Problem),
    /// The caller's `revision` is not the stored one (0: no such schedule).
    Revision(i64),
}

fn to_write(checked: &Checked, existing: Option<&Schedule>, created_at: DateTime<Utc>) -> Schedule {
    Schedule {
        schedule_id: checked.schedule_id.clone(),
        workflow_id: checked.workflow_id.clone(),
        version: checked.version,
        user_id: checked.user_id.clone(),
        cron_expr: checked.spec.as_str().to_string(),
        timezone: checked.zone.name().to_string(),
        start_at: checked.start_at,
        end_at: checked.end_at,
        next_run_at: existing.and_then(|stored| stored.next_run_at),
        paused: existing.is_some_and(|stored| stored.paused),
        jitter_ms: i32::try_from(checked.jitter_ms).expect("jitter is at most one hour"),
        overlap_policy: checked.overlap_policy,
        catchup_policy: checked.catchup_policy,
        priority: checked.priority,
        max_run_seconds: checked.max_run_seconds,
        max_queued: checked.max_queued,
        max_in_flight: checked.max_in_flight,
        failure: checked.failure.clone(),
        rules: checked.rules.stored.clone(),
        max_runs: checked.max_runs,
        deadline_s: checked.deadline_s,
        region: checked.region.clone(),
        fallback_regions: checked.fallback_regions.clone(),
        scheduled_runs: existing.map_or(0, |stored| stored.scheduled_runs),
        pause_note: existing.and_then(|stored| stored.pause_note.clone()),
        paused_until: existing.and_then(|stored| stored.paused_until),
        paused_by: existing.and_then(|stored| stored.paused_by.clone()),
        revision: existing.map_or(0, |stored| stored.revision),
        created_at,
        updated_at: existing.map_or(created_at, |stored| stored.updated_at),
    }
}

/// Writes the plans in bulk inside the caller's transaction and reconciles runs. Returns the
/// rows as stored, in plan order.
///
/// # Errors
/// [`Error::Conflict`] when a concurrent writer created or changed one of the schedules
/// after it was read (the caller's transaction must then be rolled back); [`Error::Store`].
pub(crate) async fn apply(
    conn: &mut Tx,
    plans: Vec<Plan>,
    now: DateTime<Utc>,
) -> Result<Vec<Schedule>> {
    let mut inserts = Vec::new();
    let mut updates = Vec::new();
    let mut retimed = Vec::new();
    let mut reprioritized = Vec::new();
    for plan in &plans {
        match plan {
            Plan::New(write, timetable) => {
                inserts.push(write.clone());
                retimed.push(target(write, timetable));
            }
            Plan::Changed {
                write,
                timetable,
                retime,
                reprioritize,
            } => {
                updates.push(write.clone());
                if *retime {
                    retimed.push(target(write, timetable));
                }
                if *reprioritize {
                    reprioritized.push(write.schedule_id.clone());
                }
            }
            Plan::Unchanged(_) => {}
        }
    }
    let mut written: HashMap<String, Schedule> = HashMap::new();
    let inserted = schedules::insert_many(&mut **conn, &inserts, now).await?;
    let updated = schedules::update_many(&mut **conn, &updates, now).await?;
    runs::copy_priority(&mut **conn, &reprioritized).await?;
    for row in inserted.into_iter().chain(updated) {
        written.insert(row.schedule_id.clone(), row);
    }
    if let Some(lost) = inserts
        .iter()
        .chain(&updates)
        .find(|w| !written.contains_key(&w.schedule_id))
    {
        return Err(Error::Conflict {
            detail: format!(
                "schedule {:?} was created or changed by a concurrent request; read it and retry",
                lost.schedule_id
            ),
        });
    }
    let calendar_sets: Vec<(String, Vec<String>)> = inserts
        .iter()
        .chain(&updates)
        .map(|w| (w.schedule_id.clone(), w.rules.exclude_calendars.clone()))
        .collect();
    calendars::set_for_schedules(conn, &calendar_sets).await?;
    reconcile(conn, &retimed, now).await?;
    Ok(plans
        .into_iter()
        .map(|plan| match plan {
            Plan::Unchanged(stored) => stored,
            other => written
                .remove(other.schedule_id())
                .expect("every written plan was checked above"),
        })
        .collect())
}

/// A schedule whose unpublished future runs must match its (new) timetable.
#[derive(Debug)]
pub(crate) struct Target {
    pub schedule_id: String,
    /// `None`: the schedule plans nothing now (paused): cancel, revive nothing.
    pub timetable: Option<Timetable>,
    pub jitter_ms: u32,
}

fn target(write: &Schedule, timetable: &Timetable) -> Target {
    Target {
        schedule_id: write.schedule_id.clone(),
        timetable: (!write.paused).then(|| timetable.clone()),
        jitter_ms: u32::try_from(write.jitter_ms).unwrap_or(0),
    }
}

/// Brings the never-published planned runs with a tick at or after `now` in line with each
/// target's timetable: a run whose tick is still a tick is kept (and a cancelled one comes
/// back, since its key is the tick's key and the planner could never write it again) with
/// `fire_at` recomputed from the current jitter and the schedule's current workflow,
/// version and user; any other is cancelled.
///
/// # Errors
/// [`Error::Store`].
pub(crate) async fn reconcile(conn: &mut Tx, targets: &[Target], now: DateTime<Utc>) -> Result<()> {
    if targets.is_empty() {
        return Ok(());
    }
    let by_id: HashMap<&str, &Target> = targets
        .iter()
        .map(|t| (t.schedule_id.as_str(), t))
        .collect();
    let ids: Vec<String> = targets.iter().map(|t| t.schedule_id.clone()).collect();
    let (mut keep_keys, mut keep_fire_ats, mut cancel_keys) = (Vec::new(), Vec::new(), Vec::new());
    for run in runs::future_planned(&mut **conn, &ids, now).await? {
        let target = by_id[run.schedule_id.as_str()];
        let wanted = target
            .timetable
            .as_ref()
            .is_some_and(|t| t.first_at_or_after(run.run_at) == Some(run.run_at));
        if wanted {
            let key = RunKey::tick(&run.schedule_id, run.run_at);
            keep_fire_ats.push(run.run_at + jitter_offset(&key, target.jitter_ms));
            keep_keys.push(run.idempotency_key);
        } else if run.status != RunStatus::Cancelled {
            cancel_keys.push(run.idempotency_key);
        }
    }
    runs::keep_planned(&mut **conn, &keep_keys, &keep_fire_ats, now).await?;
    runs::follow_schedule(&mut **conn, &keep_keys).await?;
    runs::cancel(&mut **conn, &cancel_keys, RESCHEDULED, now).await?;
    Ok(())
}
