//! One pass's decisions, pure: every claimed schedule planned with [`kairos_core::plan`]
//! into the rows the pass writes. A schedule with a deadline (`deadline_s`) also gets its
//! dropped missed ticks as `SKIPPED` runs (the newest [`kairos_core::MAX_DROPPED_KEPT`] per
//! pass, the rest only counted, [`kairos_core::plan_keeping_dropped`]), and its planned runs
//! of ticks already past are the ones that may take over a tick's `SKIPPED` run written
//! while the schedule was paused (`kairos_store::unlaunched::revive_paused`). Schedules
//! without a deadline plan exactly as before: nothing more is computed or written for them.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::NaiveDate;
use kairos_core::{
    plan, plan_keeping_dropped, Calendars, CatchupPolicy, NamedCalendar, PlanInput, PlanParams,
    Timetable, MAX_DROPPED_KEPT,
};
use kairos_store::planning::{Advances, DueSchedule, RunRows};
use kairos_store::timing::Decoder;
use kairos_store::unlaunched::SkippedTicks;

/// The writes of one pass.
#[derive(Debug, Default)]
pub(super) struct Batch {
    pub(super) runs: RunRows,
    pub(super) advances: Advances,
    pub(super) missed: u64,
    pub(super) parked: usize,
    pub(super) catchups: Vec<Catchup>,
    /// Dropped missed ticks of schedules with a deadline, written `SKIPPED`.
    pub(super) dropped: SkippedTicks,
    /// Planned runs of schedules with a deadline whose tick is not in the future: a
    /// paused schedule's `SKIPPED` run of such a tick becomes the planned run.
    pub(super) revivable: Revivable,
}

/// Planned runs that may take over a `paused_skip` run of their tick, as columns.
#[derive(Debug, Default)]
pub(super) struct Revivable {
    pub(super) keys: Vec<String>,
    pub(super) run_ats: Vec<chrono::DateTime<chrono::Utc>>,
    pub(super) fire_ats: Vec<chrono::DateTime<chrono::Utc>>,
}

/// A schedule that was behind: what the catch-up policy did with its missed ticks.
#[derive(Debug)]
pub(super) struct Catchup {
    schedule_id: String,
    policy: CatchupPolicy,
    /// Ticks older than the grace that were not fired.
    missed: u64,
    /// Ticks older than the grace that were planned (fired late).
    pub(super) caught_up: u64,
    /// `missed` is a lower bound.
    truncated: bool,
}

impl Catchup {
    pub(super) fn log(&self) {
        tracing::info!(
            schedule_id = %self.schedule_id,
            policy = self.policy.as_str(),
            missed = self.missed,
            caught_up = self.caught_up,
            missed_lower_bound = self.truncated,
            "catch-up applied"
        );
    }
}

pub(super) fn named_calendars(rows: HashMap<String, Vec<NaiveDate>>) -> Calendars {
    rows.into_iter()
        .filter_map(|(name, dates)| {
            let calendar = NamedCalendar::new(name.clone(), dates).ok()?;
            Some((name, Arc::new(calendar)))
        })
        .collect()
}

/// Plans every claimed schedule (pure). Each distinct (spec, zone) is parsed once.
pub(super) fn plan_batch(due: &[DueSchedule], calendars: &Calendars, params: PlanParams) -> Batch {
    let mut decoder = Decoder::default();
    let mut batch = Batch::default();
    for schedule in due {
        let timetable = decoder.due(schedule).and_then(|rules| {
            rules
                .timetable(calendars)
                .map_err(|missing| missing.to_string())
        });
        match timetable {
            Ok(timetable) => {
                let catchup = schedule.catchup_policy;
                add_plan(&mut batch, schedule, &timetable, catchup, params)
            }
            Err(reason) => park(&mut batch, schedule, reason),
        }
    }
    batch
}

fn add_plan(
    batch: &mut Batch,
    schedule: &DueSchedule,
    timetable: &Timetable,
    catchup: CatchupPolicy,
    params: PlanParams,
) {
    let input = PlanInput {
        schedule_id: &schedule.schedule_id,
        timetable,
        next_run_at: schedule.next_run_at,
        jitter_ms: u32::try_from(schedule.jitter_ms).unwrap_or(0),
        catchup,
    };
    let mut plan = match schedule.deadline_s {
        None => plan(input, params),
        Some(_) => plan_keeping_dropped(input, params, MAX_DROPPED_KEPT),
    };
    plan.limit_runs(
        schedule
            .remaining_runs
            .map(|n| u64::try_from(n).unwrap_or(0)),
    );
    let grace_start = params.now - params.misfire_grace;
    let caught_up = plan
        .runs
        .iter()
        .filter(|run| run.run_at < grace_start)
        .count() as u64;
    if plan.missed > 0 || caught_up > 0 {
        batch.catchups.push(Catchup {
            schedule_id: schedule.schedule_id.clone(),
            policy: catchup,
            missed: plan.missed,
            caught_up,
            truncated: plan.missed_truncated,
        });
    }
    for run in &plan.runs {
        let rows = &mut batch.runs;
        rows.idempotency_keys.push(run.key.as_str().to_string());
        rows.schedule_ids.push(schedule.schedule_id.clone());
        rows.run_ats.push(run.run_at);
        rows.fire_ats.push(run.fire_at);
        rows.workflow_ids.push(schedule.workflow_id.clone());
        rows.versions.push(schedule.version);
        rows.user_ids.push(schedule.user_id.clone());
    }
    if schedule.deadline_s.is_some() {
        for tick in &plan.dropped {
            let key = tick.key.as_str();
            let reason = tick.reason.as_str();
            batch
                .dropped
                .push(key, &schedule.schedule_id, tick.run_at, reason);
        }
        for run in plan.runs.iter().filter(|run| run.run_at <= params.now) {
            let revivable = &mut batch.revivable;
            revivable.keys.push(run.key.as_str().to_string());
            revivable.run_ats.push(run.run_at);
            revivable.fire_ats.push(run.fire_at);
        }
    }
    let missed = i64::try_from(plan.missed).unwrap_or(i64::MAX);
    let planned = i64::try_from(plan.runs.len()).unwrap_or(i64::MAX);
    batch.advances.push_with_runs(
        &schedule.schedule_id,
        plan.next_run_at,
        missed,
        None,
        planned,
    );
    batch.missed += plan.missed;
}

fn park(batch: &mut Batch, schedule: &DueSchedule, reason: String) {
    tracing::error!(schedule_id = %schedule.schedule_id, reason = %reason,
        "stored schedule no longer parses; parked (next_run_at cleared) until it is re-registered");
    batch
        .advances
        .push(&schedule.schedule_id, None, 0, Some(reason));
    batch.parked += 1;
}
