//! Skipping one occurrence of a schedule: [`Registrar::skip`], [`Registrar::skips`] and
//! [`Registrar::unskip`]. A skip names a future fire time of the schedule (its timetable as
//! the planner builds it); the run of that tick becomes `SKIPPED` with the reason
//! `skipped by <who>: <note>`, whether it is planned later (the planner writes it so) or
//! already planned and unpublished (marked in the skip's transaction; a run a dispatcher
//! round holds is restaged by the round, which finds the skip: [`crate::restage`]).
//! Taking a skip back before its tick restores the run. Skips of past ticks stay as the
//! record of why the tick did not run, until retention removes them.

use chrono::{DateTime, Utc};
use kairos_core::{ChangeKind, FieldChange, FieldValue, Skip, Subject, Timetable};
use kairos_store::schedules as store;
use kairos_store::{skips, Tx};

use crate::checks::{check_id, not_found, PAUSED};
use crate::error::{Error, Problem, Result};
use crate::rules::rfc3339;
use crate::timetables::timetable_of;
use crate::{input, Registrar};

/// Longest skip note, in characters.
pub const MAX_SKIP_NOTE_CHARS: usize = 1000;
/// Most skips [`Registrar::skips`] lists.
pub const SKIPS_LIST_MAX: i64 = 1000;
/// Farthest back the nearest earlier fire time of a refused `run_at` is looked for.
const NEAREST_BEFORE_MAX: chrono::Duration = chrono::Duration::days(3660);

impl Registrar {
    /// Skips the schedule's tick at `run_at` (a future fire time of it), with a note,
    /// as `by` (who: a token's name, a JWT subject, or `anonymous`).
    ///
    /// # Errors
    /// [`Error::Invalid`] naming `run_at` (not a fire time, naming the nearest ones; or
    /// not in the future) or `note` (too long); [`Error::NotFound`]; [`Error::Conflict`]
    /// when that tick is already skipped; [`Error::Store`].
    pub async fn skip(
        &self,
        schedule_id: &str,
        run_at: DateTime<Utc>,
        note: Option<&str>,
        by: &str,
    ) -> Result<Skip> {
        check_id(schedule_id)?;
        if let Some(note) = note {
            let mut problems = Vec::new();
            if !input::within(&mut problems, "note", note, MAX_SKIP_NOTE_CHARS) {
                return Err(Error::Invalid(problems));
            }
        }
        let mut tx = Tx::begin(self.pool()).await?;
        match self.skip_in(&mut tx, schedule_id, run_at, note, by).await {
            Ok(skip) => {
                tx.commit().await?;
                tracing::info!(schedule_id, run_at = %rfc3339(run_at), by, "tick skipped");
                Ok(skip)
            }
            Err(err) => {
                // The schedule's row lock goes at once, not when the connection is reused.
                tx.rollback().await?;
                Err(err)
            }
        }
    }

    /// The writes of [`Registrar::skip`] in `tx` (the caller commits or rolls back).
    async fn skip_in(
        &self,
        tx: &mut Tx,
        schedule_id: &str,
        run_at: DateTime<Utc>,
        note: Option<&str>,
        by: &str,
    ) -> Result<Skip> {
        // The schedule's row lock orders this write with every planner pass: a pass that
        // planned the tick has committed its run, and a later one sees the skip.
        let schedule = skips::get_for_update(&mut **tx, schedule_id)
            .await?
            .ok_or_else(|| not_found(schedule_id))?;
        let now = self.now(tx).await?;
        if run_at <= now {
            return Err(Error::invalid(
                "run_at",
                format!(
                    "{} is not in the future (now is {}): a tick that has fired cannot be \
                     skipped",
                    rfc3339(run_at),
                    rfc3339(now)
                ),
            ));
        }
        let timetable = timetable_of(tx, &schedule).await?;
        check_fire_time(timetable.as_ref(), schedule_id, run_at)?;
        let wanted = Skip {
            schedule_id: schedule_id.to_string(),
            run_at,
            note: note.map(str::to_string),
            skipped_by: by.to_string(),
            created_at: now,
        };
        let Some(skip) = skips::insert(&mut **tx, &wanted).await? else {
            return Err(Error::Conflict {
                detail: format!(
                    "the tick {} of schedule {schedule_id:?} is already skipped; delete the \
                     skip to write another",
                    rfc3339(run_at)
                ),
            });
        };
        let reason = skip.reason();
        let mut change = self.change(
            Subject::schedule(schedule_id, &schedule.workflow_id),
            ChangeKind::Skip,
            vec![FieldChange::new("skipped_tick", FieldValue::Null, run_at)],
        );
        change.note = note.map(str::to_string);
        crate::history::record(tx, &[change], now).await?;
        let marked = skips::mark_skipped(&mut **tx, schedule_id, run_at, &reason, now).await?;
        if marked.held > 0 {
            // A dispatcher round holds the run: a new revision makes it restage the run
            // before publishing it, and the restage finds this skip.
            skips::touch(&mut **tx, schedule_id, now).await?;
        }
        Ok(skip)
    }

    /// A schedule's skips, past and future, in tick order (at most [`SKIPS_LIST_MAX`]).
    ///
    /// # Errors
    /// [`Error::NotFound`] when the schedule does not exist; [`Error::Store`].
    pub async fn skips(&self, schedule_id: &str) -> Result<Vec<Skip>> {
        check_id(schedule_id)?;
        if store::get(self.pool(), schedule_id).await?.is_none() {
            return Err(not_found(schedule_id));
        }
        Ok(skips::list(self.pool(), schedule_id, None, SKIPS_LIST_MAX).await?)
    }

    /// Takes back the skip of the tick at `run_at` before it fires: a run it marked
    /// `SKIPPED` is planned again (`PENDING`, or cancelled as paused while the schedule is
    /// paused), else the planner plans the tick. `by` is who asked.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming `run_at` when the tick has passed (the skip is kept as
    /// its record); [`Error::NotFound`] (schedule or skip); [`Error::Store`].
    pub async fn unskip(&self, schedule_id: &str, run_at: DateTime<Utc>, by: &str) -> Result<Skip> {
        check_id(schedule_id)?;
        let mut tx = Tx::begin(self.pool()).await?;
        match self.unskip_in(&mut tx, schedule_id, run_at).await {
            Ok(skip) => {
                tx.commit().await?;
                tracing::info!(schedule_id, run_at = %rfc3339(run_at), by, "skip taken back");
                Ok(skip)
            }
            Err(err) => {
                tx.rollback().await?;
                Err(err)
            }
        }
    }

    /// The writes of [`Registrar::unskip`] in `tx` (the caller commits or rolls back).
    async fn unskip_in(
        &self,
        tx: &mut Tx,
        schedule_id: &str,
        run_at: DateTime<Utc>,
    ) -> Result<Skip> {
        let schedule = skips::get_for_update(&mut **tx, schedule_id)
            .await?
            .ok_or_else(|| not_found(schedule_id))?;
        let now = self.now(tx).await?;
        let Some(skip) = skips::delete(&mut **tx, schedule_id, run_at).await? else {
            return Err(Error::NotFound {
                what: format!("skip of schedule {schedule_id:?} at {}", rfc3339(run_at)),
            });
        };
        if run_at <= now {
            return Err(Error::invalid(
                "run_at",
                format!(
                    "{} has passed (now is {}): the skip is kept as the record of why the \
                     tick did not run",
                    rfc3339(run_at),
                    rfc3339(now)
                ),
            ));
        }
        skips::unmark_skipped(&mut **tx, schedule_id, run_at, &skip.reason(), PAUSED, now).await?;
        let change = self.change(
            Subject::schedule(schedule_id, &schedule.workflow_id),
            ChangeKind::Unskip,
            vec![FieldChange::new("skipped_tick", run_at, FieldValue::Null)],
        );
        crate::history::record(tx, &[change], now).await?;
        Ok(skip)
    }
}

/// `Ok` when `run_at` is a fire time of `timetable`; else a problem naming `run_at` and the
/// nearest fire times before and after it.
fn check_fire_time(
    timetable: Option<&Timetable>,
    schedule_id: &str,
    run_at: DateTime<Utc>,
) -> Result<()> {
    let Some(timetable) = timetable else {
        return Err(Error::invalid(
            "run_at",
            format!("schedule {schedule_id:?} has no fire times to skip"),
        ));
    };
    if timetable.first_at_or_after(run_at) == Some(run_at) {
        return Ok(());
    }
    let before = nearest_before(timetable, run_at);
    let after = timetable.first_at_or_after(run_at);
    let name = |at: Option<DateTime<Utc>>| at.map_or_else(|| "none".to_string(), rfc3339);
    Err(Error::Invalid(vec![Problem::new(
        "run_at",
        format!(
            "{} is not a fire time of schedule {schedule_id:?}: the nearest fire times are {} \
             (before) and {} (after)",
            rfc3339(run_at),
            name(before),
            name(after)
        ),
    )]))
}

/// The last fire time before `at`: a window doubling backwards from `at` until it holds
/// one, then the ticks in it walked forwards (at most [`NEAREST_BEFORE_MAX`] back).
fn nearest_before(timetable: &Timetable, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let mut span = chrono::Duration::seconds(1);
    while span <= NEAREST_BEFORE_MAX {
        let from = at - span;
        if let Some(first) = timetable.first_at_or_after(from).filter(|t| *t < at) {
            let rest = timetable.ticks_after(first).take_while(|t| *t < at);
            return std::iter::once(first).chain(rest).take(100_000).last();
        }
        span = span * 2;
    }
    None
}
