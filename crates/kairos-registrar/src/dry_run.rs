//! Dry-runs of a change (`?dry_run=true` on an upsert or a deploy): the real write runs in a
//! transaction that is rolled back, and the answer says what it would have done — per
//! schedule created, updated, unchanged or removed, its next fire times before and after, and
//! how many unpublished runs it would cancel, and the operator's skips among those fire
//! times (they will not run), as a stored schedule's explained preview marks them. Nothing
//! is stored: the transaction is dropped,
//! never committed, so no row, revision or notification survives.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use kairos_core::{Schedule, Skip};
use kairos_store::runs;
use kairos_store::schedules as store;
use kairos_store::Tx;

use crate::error::Result;
use crate::input::{self, ScheduleInput};
use crate::timetables::timetable_of;
use crate::workflows::WorkflowInput;
use crate::{Error, Registrar};

/// Fire times shown before and after, per schedule.
const DRY_RUN_TICKS: usize = 5;

/// What a change would do to one schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// It does not exist yet.
    Created,
    /// Some field changes.
    Updated,
    /// Every field is as stored.
    Unchanged,
    /// A deploy drops it from the workflow's set.
    Removed,
}

impl Change {
    /// The name as the API shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Created => "created",
            Change::Updated => "updated",
            Change::Unchanged => "unchanged",
            Change::Removed => "removed",
        }
    }
}

/// One schedule in a [`DryRun`].
#[derive(Debug, Clone)]
pub struct ScheduleChange {
    /// Its id.
    pub schedule_id: String,
    /// What would happen to it.
    pub change: Change,
    /// Its next fire times as stored (empty when it does not exist or never fires).
    pub before: Vec<DateTime<Utc>>,
    /// Its next fire times after the change (empty when removed or never fires).
    pub after: Vec<DateTime<Utc>>,
    /// Unpublished runs the change would cancel.
    pub runs_cancelled: i64,
    /// The skips of the schedule (`schedule_skips`) among `before` and `after`, in tick
    /// order: those fire times will not run.
    pub skips: Vec<Skip>,
}

/// What a change would do; nothing was stored.
#[derive(Debug, Clone)]
pub struct DryRun {
    /// Per schedule, in the order of the request (removed ones last).
    pub schedules: Vec<ScheduleChange>,
    /// The deploy would store a new workflow version (always false for an upsert).
    pub workflow_created: bool,
}

/// The stored side of the schedules a change touches, read before it.
struct Before {
    rows: HashMap<String, Schedule>,
    ticks: HashMap<String, Vec<DateTime<Utc>>>,
    unpublished: HashMap<String, i64>,
}

async fn before(tx: &mut Tx, ids: &[String], now: DateTime<Utc>) -> Result<Before> {
    let rows: HashMap<String, Schedule> = store::get_many(&mut **tx, ids)
        .await?
        .into_iter()
        .map(|row| (row.schedule_id.clone(), row))
        .collect();
    let mut ticks = HashMap::new();
    for row in rows.values() {
        ticks.insert(row.schedule_id.clone(), next_ticks(tx, row, now).await?);
    }
    let unpublished = runs::unpublished_counts(&mut **tx, ids)
        .await?
        .into_iter()
        .collect();
    Ok(Before {
        rows,
        ticks,
        unpublished,
    })
}

/// A stored schedule's next fire times at or after `now` (none while paused or exhausted).
async fn next_ticks(tx: &mut Tx, row: &Schedule, now: DateTime<Utc>) -> Result<Vec<DateTime<Utc>>> {
    if row.paused || row.next_run_at.is_none() {
        return Ok(Vec::new());
    }
    let Some(timetable) = timetable_of(tx, row).await? else {
        return Ok(Vec::new());
    };
    let from = row.next_run_at.map_or(now, |next| next.max(now));
    let first = timetable.first_at_or_after(from);
    let rest = first.into_iter().flat_map(|f| timetable.ticks_after(f));
    let ticks = first.into_iter().chain(rest);
    Ok(ticks.take(DRY_RUN_TICKS).collect())
}

async fn report(
    tx: &mut Tx,
    before: Before,
    written: &[Schedule],
    removed: &[String],
    now: DateTime<Utc>,
) -> Result<Vec<ScheduleChange>> {
    let ids: Vec<String> = written
        .iter()
        .map(|s| s.schedule_id.clone())
        .chain(removed.iter().cloned())
        .collect();
    let after_counts: HashMap<String, i64> = runs::unpublished_counts(&mut **tx, &ids)
        .await?
        .into_iter()
        .collect();
    let cancelled = |id: &str| {
        let was = before.unpublished.get(id).copied().unwrap_or(0);
        (was - after_counts.get(id).copied().unwrap_or(0)).max(0)
    };
    let mut changes = Vec::new();
    for row in written {
        let id = row.schedule_id.as_str();
        let change = match before.rows.get(id) {
            None => Change::Created,
            Some(stored) if stored.revision == row.revision => Change::Unchanged,
            Some(_) => Change::Updated,
        };
        let ticks_before = before.ticks.get(id).cloned().unwrap_or_default();
        let after = next_ticks(tx, row, now).await?;
        changes.push(ScheduleChange {
            schedule_id: id.to_string(),
            change,
            skips: skips_among(tx, id, &ticks_before, &after).await?,
            before: ticks_before,
            after,
            runs_cancelled: cancelled(id),
        });
    }
    for id in removed {
        let ticks_before = before.ticks.get(id).cloned().unwrap_or_default();
        changes.push(ScheduleChange {
            schedule_id: id.clone(),
            change: Change::Removed,
            skips: skips_among(tx, id, &ticks_before, &[]).await?,
            before: ticks_before,
            after: Vec::new(),
            runs_cancelled: cancelled(id),
        });
    }
    Ok(changes)
}

/// The skips of `schedule_id` among the fire times before and after the change, read in the
/// change's transaction (so as the change would leave them), in tick order.
async fn skips_among(
    tx: &mut Tx,
    schedule_id: &str,
    before: &[DateTime<Utc>],
    after: &[DateTime<Utc>],
) -> Result<Vec<Skip>> {
    let mut ticks: Vec<DateTime<Utc>> = before.iter().chain(after).copied().collect();
    ticks.sort();
    ticks.dedup();
    if ticks.is_empty() {
        return Ok(Vec::new());
    }
    crate::timetables::among(tx, schedule_id, &ticks).await
}

impl Registrar {
    /// What [`Registrar::upsert`] would do with `input`; nothing is stored.
    ///
    /// # Errors
    /// As [`Registrar::upsert`]: the same checks refuse the same inputs.
    pub async fn upsert_dry_run(&self, input: &ScheduleInput) -> Result<DryRun> {
        let checked = input::check(input, &self.settings).map_err(Error::Invalid)?;
        let mut tx = Tx::begin(&self.pool).await?;
        let now = self.now(&mut tx).await?;
        let ids = [checked.schedule_id.clone()];
        let before = before(&mut tx, &ids, now).await?;
        let upserted = self.upsert_in(&mut tx, checked).await?;
        let schedules = report(&mut tx, before, &[upserted.schedule], &[], now).await?;
        // Dropped, not committed: the transaction rolls back.
        drop(tx);
        Ok(DryRun {
            schedules,
            workflow_created: false,
        })
    }

    /// What [`Registrar::put_workflow`] would do with `input`; nothing is stored.
    ///
    /// # Errors
    /// As [`Registrar::put_workflow`].
    pub async fn put_workflow_dry_run(&self, input: &WorkflowInput) -> Result<DryRun> {
        let mut tx = Tx::begin(&self.pool).await?;
        let now = self.now(&mut tx).await?;
        let mut ids: Vec<String> = input
            .schedules
            .iter()
            .flatten()
            .filter_map(|s| s.schedule_id.clone())
            .collect();
        let stored = store::for_sync(&mut *tx, &input.workflow_id, &ids).await?;
        ids.extend(stored.into_iter().map(|s| s.schedule_id));
        let before = before(&mut tx, &ids, now).await?;
        let deployed = self.put_workflow_in(&mut tx, input).await?;
        let schedules =
            report(&mut tx, before, &deployed.schedules, &deployed.removed, now).await?;
        drop(tx);
        Ok(DryRun {
            schedules,
            workflow_created: deployed.created,
        })
    }
}
