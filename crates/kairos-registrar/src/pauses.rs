//! Pausing and resuming: [`Registrar::pause`] (with a note, who, and an end, `until`), and
//! [`resume_ended_pauses`], which a planner pass calls to resume the schedules whose pause
//! ended, with the same writes as a caller's resume ([`change_pause`]).

use chrono::{DateTime, Utc};
use kairos_core::{schedule_fields, Actor, Change, ChangeKind, Schedule, Subject, Timetable};
use kairos_store::runs;
use kairos_store::schedules as store;
use kairos_store::Tx;

use crate::apply::{self, Target};
use crate::checks::{check_id, concurrent, not_found, MAX_PAUSE_NOTE_CHARS, PAUSED};
use crate::error::{Error, Problem, Result};
use crate::input;
use crate::rules::rfc3339;
use crate::timetables::timetable_of;
use crate::Registrar;

impl Registrar {
    /// Pauses or resumes as `by` (who: a token's name, a JWT subject, or `anonymous`), with
    /// a note and, when pausing, the time it resumes by itself (`until`, in the future; a
    /// planner resumes it then, as a resume by a caller would, see [`resume_ended_pauses`]).
    /// A pause without `until` lasts until a resume; a resume clears note, `until` and who.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming `note` (too long) or `until` (not in the future, or given
    /// with `paused: false`); as [`Registrar::set_paused`].
    pub async fn pause(
        &self,
        schedule_id: &str,
        change: PauseChange<'_>,
        by: &str,
    ) -> Result<Schedule> {
        check_id(schedule_id)?;
        let mut problems = Vec::new();
        if let Some(note) = change.note {
            input::within(&mut problems, "note", note, MAX_PAUSE_NOTE_CHARS);
        }
        if change.until.is_some() && !change.paused {
            problems.push(Problem::new(
                "until",
                "is only allowed with paused: true (a resume is at once)",
            ));
        }
        if !problems.is_empty() {
            return Err(Error::Invalid(problems));
        }
        let mut tx = Tx::begin(&self.pool).await?;
        let now = self.now(&mut tx).await?;
        if let Some(until) = change.until.filter(|until| *until <= now) {
            return Err(Error::invalid(
                "until",
                format!(
                    "{} is not in the future (now is {}): a pause must end later",
                    rfc3339(until),
                    rfc3339(now)
                ),
            ));
        }
        let stored = store::get(&mut *tx, schedule_id)
            .await?
            .ok_or_else(|| not_found(schedule_id))?;
        let actor = Actor::new(by, self.actor().request_id.clone());
        let (written, skipped_while_paused) =
            change_pause(&mut tx, stored, change, &actor, now, now).await?;
        tx.commit().await?;
        record_paused_ticks(schedule_id, skipped_while_paused);
        Ok(written)
    }
}

/// Most ticks counted one by one for a paused span; a longer span reports this many.
const MAX_PAUSED_TICKS_COUNTED: u64 = 100_000;

/// The ticks in `[from, to)`, counted up to `MAX_PAUSED_TICKS_COUNTED`.
fn ticks_between(timetable: &Timetable, from: DateTime<Utc>, to: DateTime<Utc>) -> u64 {
    let Some(first) = timetable.first_at_or_after(from) else {
        return 0;
    };
    let rest = timetable.ticks_after(first);
    let within = std::iter::once(first)
        .chain(rest)
        .take_while(|tick| *tick < to);
    within.take(MAX_PAUSED_TICKS_COUNTED as usize).count() as u64
}

/// Who resumes a schedule whose pause ended (`paused_until`).
pub const PAUSE_ENDED_BY: &str = "kairos (pause ended)";
/// Who a write names when its caller did not say.
pub(crate) const ANONYMOUS: &str = "anonymous";

/// A pause or a resume.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PauseChange<'a> {
    /// Pause (true) or resume.
    pub paused: bool,
    /// Why (pause only; a pause without one keeps the note of a paused schedule).
    pub note: Option<&'a str>,
    /// When the pause ends by itself (pause only; `None`: at a resume).
    pub until: Option<DateTime<Utc>>,
}

/// A schedule whose pause ended and that a planner resumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumed {
    /// The schedule.
    pub schedule_id: String,
    /// The `paused_until` it resumed at.
    pub at: DateTime<Utc>,
    /// Ticks of the paused span, not planned.
    pub ticks_skipped: u64,
}

impl Resumed {
    /// Counts and logs the resume; call it once the transaction committed.
    pub fn record(&self) {
        tracing::info!(schedule_id = %self.schedule_id, at = %rfc3339(self.at), "pause ended; schedule resumed");
        record_paused_ticks(&self.schedule_id, self.ticks_skipped);
    }
}

/// Resumes, in the caller's transaction (a planner pass, on the database clock `now`), up
/// to `limit` schedules whose `paused_until` has come, each exactly as a caller's resume
/// would, from its `paused_until`: the ticks from then on are planned (those older than the
/// misfire grace by the schedule's catch-up policy). Each is locked and skipped if another
/// transaction holds it, and a resumed one is no longer paused, so a second instance (or a
/// second pass) resumes nothing.
///
/// # Errors
/// [`Error::Store`]; [`Error::Conflict`] cannot happen (the row is locked).
pub async fn resume_ended_pauses(
    tx: &mut Tx,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<Resumed>> {
    let due = kairos_store::pauses::claim_pause_ends(&mut **tx, now, limit).await?;
    let mut resumed = Vec::with_capacity(due.len());
    for stored in due {
        let schedule_id = stored.schedule_id.clone();
        let at = stored.paused_until.unwrap_or(now).min(now);
        let change = PauseChange {
            paused: false,
            note: None,
            until: None,
        };
        let actor = Actor::new(PAUSE_ENDED_BY, None);
        let (_, ticks_skipped) = change_pause(tx, stored, change, &actor, now, at).await?;
        resumed.push(Resumed {
            schedule_id,
            at,
            ticks_skipped,
        });
    }
    Ok(resumed)
}

/// The writes of a pause or a resume of `stored` (read in `tx`): a resume plans from
/// `resume_at` (now for a caller; the pause's end for a planner), recorded in the history of
/// changes as made by `actor`. Returns the row written and the ticks of the paused span, not
/// planned.
async fn change_pause(
    tx: &mut Tx,
    stored: Schedule,
    change: PauseChange<'_>,
    actor: &Actor,
    now: DateTime<Utc>,
    resume_at: DateTime<Utc>,
) -> Result<(Schedule, u64)> {
    let schedule_id = stored.schedule_id.as_str();
    let PauseChange { paused, until, .. } = change;
    let note = change.note.filter(|_| paused);
    if stored.paused == paused
        && (!paused
            || (note.is_none() || stored.pause_note.as_deref() == note)
                && stored.paused_until == until)
    {
        return Ok((stored, 0));
    }
    let paused_since = store::paused_at(&mut **tx, schedule_id).await?;
    let timetable = timetable_of(tx, &stored).await?;
    if let (false, Some(timetable)) = (paused, &timetable) {
        // A schedule with a deadline: the paused ticks no sweep wrote yet get their run.
        crate::paused_ticks::record_before_resume(tx, &stored, timetable, resume_at, now).await?;
    }
    let exhausted = stored.remaining_runs() == Some(0);
    let next_run_at = match (&timetable, paused) {
        (Some(_), false) if exhausted => None,
        (Some(timetable), false) => timetable.first_at_or_after(resume_at),
        _ => stored.next_run_at,
    };
    let note = note.or(stored.pause_note.as_deref().filter(|_| stored.paused));
    let write = store::PauseWrite {
        paused,
        note,
        until,
        by: Some(actor.name.as_str()),
        next_run_at,
    };
    let written = store::set_paused(&mut **tx, schedule_id, write, stored.revision, now)
        .await?
        .ok_or_else(|| concurrent(schedule_id))?;
    let fields = schedule_fields(Some(&stored), Some(&written));
    if !fields.is_empty() {
        let change = Change {
            subject: Subject::schedule(schedule_id, &written.workflow_id),
            kind: if paused {
                ChangeKind::Pause
            } else {
                ChangeKind::Resume
            },
            actor: actor.clone(),
            note: written.pause_note.clone().filter(|_| paused),
            fields,
        };
        crate::history::record(tx, &[change], now).await?;
    }
    let ids = [schedule_id.to_string()];
    let mut skipped_while_paused = 0;
    if paused {
        runs::cancel_unpublished(&mut **tx, &ids, PAUSED, now).await?;
    } else {
        if let (Some(since), Some(timetable)) = (paused_since, &timetable) {
            skipped_while_paused = ticks_between(timetable, since, resume_at);
        }
        let target = Target {
            schedule_id: schedule_id.to_string(),
            timetable,
            jitter_ms: u32::try_from(stored.jitter_ms).unwrap_or(0),
        };
        apply::reconcile(tx, &[target], now).await?;
    }
    Ok((written, skipped_while_paused))
}

/// Counts and logs the ticks a schedule skipped while paused.
fn record_paused_ticks(schedule_id: &str, ticks: u64) {
    if ticks > 0 {
        metrics::counter!("kairos_runs_skipped_total", "reason" => "paused").increment(ticks);
        tracing::info!(schedule_id, ticks, "ticks skipped while paused");
    }
}
