//! Runs an operator asks for (docs/design.md §4): trigger-now and backfill.
//!
//! - [`Registrar::trigger`]: one run keyed on the schedule and the caller's request id
//!   ([`RunKey::manual`], its own key space), `source = manual`, firing at the database's now.
//!   The same request id again answers the run it created; two request ids are two runs,
//!   even within one second.
//! - [`Registrar::backfill`]: the schedule's ticks in `[from, to]` with the planner's keys
//!   ([`RunKey::tick`]), `source = backfill`, firing now. A tick that already has a row (fired,
//!   skipped, cancelled, or planned) is counted as present and left alone. At most
//!   [`BACKFILL_MAX_TICKS`] ticks per call, and `to` may not be in the future (future ticks
//!   are the planner's).
//!
//! Both work on paused schedules too: they are explicit requests.

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use kairos_core::{
    ChangeKind, FieldChange, FieldValue, OverlapPolicy, Run, RunKey, RunSource, RunStatus, Subject,
};
use kairos_store::dispatch;
use kairos_store::planning::{self, RunRows};
use kairos_store::runs::{self, NewRun};
use kairos_store::schedules as store;
use kairos_store::wakeups;

use kairos_store::Tx;

use crate::checks::{check_id, not_found};
use crate::error::{Error, Result};
use crate::history;
use crate::rules::rfc3339;
use crate::timetables::timetable_of;
use crate::Registrar;

/// Most ticks one backfill call may create or find.
pub const BACKFILL_MAX_TICKS: usize = 1000;

/// What [`Registrar::trigger`] answers.
#[derive(Debug, Clone)]
pub struct Triggered {
    /// The run, as stored.
    pub run: Run,
    /// False when the request id had been used before (the existing run is answered).
    pub created: bool,
}

/// What [`Registrar::backfill`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backfilled {
    /// Ticks in the range.
    pub ticks: u64,
    /// Runs written by this call.
    pub created: u64,
    /// Ticks that already had a run (not written again).
    pub already_present: u64,
}

impl Registrar {
    /// The runs a chain fired from run `key` (at most [`kairos_store::runs::CHILDREN_MAX`]),
    /// oldest tick first; none for an unknown key.
    ///
    /// # Errors
    /// [`Error::Store`].
    pub async fn children(&self, key: &str) -> Result<Vec<Run>> {
        let mut tx = Tx::begin(&self.pool).await?;
        let children = runs::children(&mut *tx, key).await?;
        tx.commit().await?;
        Ok(children)
    }

    /// Creates a run of `schedule_id` now, keyed on `request_id`, or answers the run that
    /// request id created before. `overlap_policy` overrides the schedule's for this run;
    /// a paused schedule can be triggered.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad id or policy; [`Error::NotFound`]; [`Error::Store`].
    pub async fn trigger(
        &self,
        schedule_id: &str,
        request_id: &str,
        overlap_policy: Option<&str>,
    ) -> Result<Triggered> {
        check_id(schedule_id)?;
        let overlap = overlap_override(overlap_policy)?;
        kairos_core::validate_id("request_id", request_id)
            .map_err(|err| Error::invalid("request_id", err.to_string()))?;
        let mut tx = Tx::begin(&self.pool).await?;
        let now = self.now(&mut tx).await?;
        let schedule = store::get(&mut *tx, schedule_id)
            .await?
            .ok_or_else(|| not_found(schedule_id))?;
        let key = RunKey::manual(schedule_id, request_id);
        let policy = overlap.unwrap_or(schedule.overlap_policy);
        let run = NewRun {
            idempotency_key: key.as_str().to_string(),
            schedule_id: schedule.schedule_id,
            // Invariant: run_at is whole seconds (CHECK in schedule_runs).
            run_at: whole_seconds(now),
            fire_at: now,
            status: RunStatus::Pending,
            source: RunSource::Manual,
            overlap,
            workflow_id: schedule.workflow_id,
            version: schedule.version,
            user_id: schedule.user_id,
        };
        let created = runs::insert(&mut *tx, &run, now).await?;
        // The run existed (`created` false) but retention may delete a finished run between
        // the insert and this read: then the request is answered as a conflict, not a panic.
        let Some(stored) = runs::get(&mut *tx, key.as_str()).await? else {
            return Err(Error::Conflict {
                detail: format!(
                    "the run of request_id {request_id:?} was deleted by history retention \
                     while this request read it; trigger with a new request_id"
                ),
            });
        };
        // A request id names one request: the same id with other parameters is refused, not
        // answered with the first request's run.
        if !created {
            let first = runs::overlap_override(&mut *tx, key.as_str())
                .await?
                .flatten();
            if first != overlap {
                let name = |policy: Option<OverlapPolicy>| match policy {
                    Some(policy) => format!("overlap_policy {:?}", policy.as_str()),
                    None => "no overlap_policy (the schedule's own)".to_string(),
                };
                return Err(Error::Conflict {
                    detail: format!(
                        "request_id {request_id:?} was first used with {}, and this request \
                         asks for {}. A request with other parameters needs a new request_id.",
                        name(first),
                        name(overlap)
                    ),
                });
            }
        }
        if created {
            // A new run that overlap `skip` would only skip is refused: the transaction is
            // dropped uncommitted, so the insert above is not kept.
            refuse_if_skipped(&mut tx, &stored.schedule_id, policy).await?;
            wakeups::runs_due(&mut *tx).await?;
            let subject = Subject::run(key.as_str(), &stored.schedule_id, &stored.workflow_id);
            let mut fields = vec![FieldChange::new("run", FieldValue::Null, key.as_str())];
            if let Some(overlap) = overlap {
                fields.push(FieldChange::new(
                    "overlap_policy",
                    FieldValue::Null,
                    overlap.as_str(),
                ));
            }
            let change = self.change(subject, ChangeKind::Trigger, fields);
            history::record(&mut tx, &[change], now).await?;
        }
        tx.commit().await?;
        Ok(Triggered {
            run: stored,
            created,
        })
    }

    /// Writes the runs of the schedule's ticks in `[from, to]` that have none yet. They run
    /// under `overlap_policy`, by default `queue`: every backfilled tick runs, one after
    /// another, in tick order (their `fire_at` is now plus a microsecond per tick).
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad id or policy, `to` before `from` or in the future, or
    /// more than [`BACKFILL_MAX_TICKS`] ticks; [`Error::NotFound`]; [`Error::Store`].
    pub async fn backfill(
        &self,
        schedule_id: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        overlap_policy: Option<&str>,
    ) -> Result<Backfilled> {
        check_id(schedule_id)?;
        let overlap = overlap_override(overlap_policy)?.unwrap_or(OverlapPolicy::Queue);
        if to < from {
            return Err(Error::invalid(
                "to",
                format!("{} is before from {}", rfc3339(to), rfc3339(from)),
            ));
        }
        let mut tx = Tx::begin(&self.pool).await?;
        let now = self.now(&mut tx).await?;
        if to > now {
            return Err(Error::invalid(
                "to",
                format!(
                    "{} is in the future (now is {}): future ticks are planned by the planner",
                    rfc3339(to),
                    rfc3339(now)
                ),
            ));
        }
        let schedule = store::get(&mut *tx, schedule_id)
            .await?
            .ok_or_else(|| not_found(schedule_id))?;
        let timetable = timetable_of(&mut tx, &schedule)
            .await?
            .ok_or_else(|| Error::Conflict {
                detail: format!("schedule {schedule_id:?} has a stored spec that no longer parses"),
            })?;
        let first = timetable.first_at_or_after(from);
        let ticks: Vec<DateTime<Utc>> = first
            .into_iter()
            .chain(first.into_iter().flat_map(|t| timetable.ticks_after(t)))
            .take_while(|tick| *tick <= to)
            .take(BACKFILL_MAX_TICKS + 1)
            .collect();
        if ticks.len() > BACKFILL_MAX_TICKS {
            return Err(Error::invalid(
                "to",
                format!(
                    "the range holds more than {BACKFILL_MAX_TICKS} ticks; split it into smaller ranges"
                ),
            ));
        }
        let mut rows = RunRows::default();
        for (order, tick) in ticks.iter().enumerate() {
            rows.idempotency_keys
                .push(RunKey::tick(schedule_id, *tick).as_str().to_string());
            rows.schedule_ids.push(schedule.schedule_id.clone());
            rows.run_ats.push(*tick);
            rows.fire_ats
                .push(now + TimeDelta::microseconds(i64::try_from(order).unwrap_or(0)));
            rows.workflow_ids.push(schedule.workflow_id.clone());
            rows.versions.push(schedule.version);
            rows.user_ids.push(schedule.user_id.clone());
        }
        let created =
            planning::insert_runs(&mut *tx, &rows, RunSource::Backfill, Some(overlap), now).await?;
        if created > 0 {
            wakeups::runs_due(&mut *tx).await?;
            let subject = Subject::schedule(&schedule.schedule_id, &schedule.workflow_id);
            let fields = vec![
                FieldChange::new("from", FieldValue::Null, from),
                FieldChange::new("to", FieldValue::Null, to),
                FieldChange::new("overlap_policy", FieldValue::Null, overlap.as_str()),
                FieldChange::new("runs_created", FieldValue::Null, created),
            ];
            let change = self.change(subject, ChangeKind::Backfill, fields);
            history::record(&mut tx, &[change], now).await?;
        }
        tx.commit().await?;
        let ticks = ticks.len() as u64;
        Ok(Backfilled {
            ticks,
            created,
            already_present: ticks - created,
        })
    }
}

fn whole_seconds(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(TimeDelta::seconds(1))
        .expect("an instant truncates to seconds")
}

/// A request's `overlap_policy`, checked.
fn overlap_override(text: Option<&str>) -> Result<Option<OverlapPolicy>> {
    text.map(|text| {
        text.parse::<OverlapPolicy>()
            .map_err(|err| Error::invalid("overlap_policy", err.to_string()))
    })
    .transpose()
}

/// Refuses a new trigger that its overlap policy would only skip: under `skip` (the
/// schedule's, or the trigger's own: `policy`), while the schedule's runs in flight fill it
/// (`max_in_flight`, else one). The caller drops its transaction, so nothing is written;
/// the answer names the run in flight and how to run anyway. A run that goes in flight
/// after this check is still decided at launch.
///
/// # Errors
/// [`Error::Conflict`]; [`Error::Store`].
async fn refuse_if_skipped(tx: &mut Tx, schedule_id: &str, policy: OverlapPolicy) -> Result<()> {
    if policy != OverlapPolicy::Skip {
        return Ok(());
    }
    let id = schedule_id.to_string();
    let found = dispatch::blockers(tx, std::slice::from_ref(&id)).await?;
    let Some(blockers) = found.get(&id) else {
        return Ok(());
    };
    let limit = i64::from(blockers.max_in_flight.unwrap_or(1).max(1));
    match &blockers.in_flight {
        Some(oldest) if blockers.in_flight_count >= limit => {
            let filled = if limit == 1 {
                format!("run {oldest} is in flight")
            } else {
                format!(
                    "{} runs are in flight (max_in_flight {limit}), the oldest {oldest}",
                    blockers.in_flight_count
                )
            };
            Err(Error::Conflict {
                detail: format!(
                    "schedule {id:?} has overlap_policy \"skip\" and {filled}, so this run \
                     would be skipped; nothing was triggered. Wait for it to finish, or \
                     trigger with overlap_policy \"allow\" to run beside it or \"queue\" to \
                     run after it."
                ),
            })
        }
        _ => Ok(()),
    }
}
