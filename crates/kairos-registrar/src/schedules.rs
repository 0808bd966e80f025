//! Schedule operations of the [`Registrar`]: upsert, pause/resume, delete, get, list, runs
//! and preview.

use chrono::{DateTime, Utc};
use kairos_core::{Schedule, ScheduleStats, Timetable};
use kairos_store::runs;
use kairos_store::schedules::{self as store, ListFilter};
use kairos_store::stats;

use kairos_core::{ChangeKind, RunStatus};
use kairos_store::Tx;

use crate::apply::{self, Plan};
use crate::checks::{check_id, check_limit, check_search, not_found, plan_error, DELETED};
use crate::cursor::RunPage;
use crate::error::{Error, Problem, Result};
use crate::history;
use crate::input::{self, check_zone, ScheduleInput, Settings};
use crate::pauses::{PauseChange, ANONYMOUS};
use crate::timetables::{among, next_fire, next_fires, preview_from, timetable_of};
use crate::{rules, Registrar};

/// How many ticks `get` previews.
const PREVIEW_TICKS: usize = 5;
/// Most fire times [`Registrar::preview`] returns.
const PREVIEW_MAX: i64 = 100;

/// What an upsert stored.
#[derive(Debug, Clone)]
pub struct Upserted {
    /// The row as stored.
    pub schedule: Schedule,
    /// True when the schedule did not exist before.
    pub created: bool,
}

/// A schedule with its next fire times.
#[derive(Debug, Clone)]
pub struct ScheduleView {
    /// The row as stored.
    pub schedule: Schedule,
    /// The next ticks at or after now (empty once it is exhausted).
    pub preview: Vec<DateTime<Utc>>,
    /// Last fire, last status, missed and skipped ticks, and why the last tick that did
    /// not launch did not (over the newest [`stats::DEFAULT_WINDOW`] runs).
    pub stats: ScheduleStats,
    /// Why a chained schedule cannot fire now (its parent is gone); `None` otherwise.
    pub waiting_on: Option<String>,
    /// The preview's times explained (wall time, UTC offset, DST or roll, jitter).
    pub explained: Vec<kairos_core::TickExplained>,
    /// The skips of the preview's ticks (those ticks will not run).
    pub skips: Vec<kairos_core::Skip>,
    /// Its next fire: none while paused without an end; else the first tick after the
    /// pause ends (or now) that is not skipped.
    pub next_fire: Option<DateTime<Utc>>,
}

/// One page of [`Registrar::list`].
#[derive(Debug, Clone)]
pub struct Page {
    /// The schedules, in `schedule_id` order.
    pub schedules: Vec<Schedule>,
    /// The next fire of each schedule, in the same order (as [`ScheduleView::next_fire`]).
    pub next_fires: Vec<Option<DateTime<Utc>>>,
    /// Pass as `after` to get the next page; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// The body of a preview: a spec evaluated without storing anything.
#[derive(Debug, Clone, Default)]
pub struct PreviewInput {
    /// Cron expression, `@every <duration>` or `@at <RFC3339>`.
    pub cron_expr: String,
    /// IANA zone name.
    pub timezone: String,
    /// Window start (also the `@every` anchor).
    pub start_at: Option<DateTime<Utc>>,
    /// Window end.
    pub end_at: Option<DateTime<Utc>>,
    /// How many fire times (1..=100, default 5).
    pub count: Option<i64>,
    /// Fire times strictly after this instant (default: now; also the `@every` anchor).
    pub after: Option<DateTime<Utc>>,
    /// Exclusions, calendars, roll and DST policy, as in an upsert.
    pub rules: crate::RulesInput,
    /// The schedule id the jitter is computed for (jitter comes from the run key).
    pub schedule_id: Option<String>,
    /// Jitter bound, `0..=3_600_000` ms; explained ticks show the offset each run gets.
    pub jitter_ms: Option<i64>,
    /// `1..=31_536_000` s, as in an upsert: explained ticks show each run's deadline.
    pub deadline_s: Option<i64>,
}

/// A preview with what the calendar rules did.
#[derive(Debug, Clone)]
pub struct Preview {
    /// The fire times.
    pub fire_times: Vec<DateTime<Utc>>,
    /// Times the exclusions removed between `after` and the last fire time (at most 100).
    pub excluded: Vec<kairos_core::Excluded>,
    /// Fire times that were rolled or placed by a DST rule, with why.
    pub notes: Vec<kairos_core::TickNote>,
    /// Every fire time explained: wall time, UTC offset, DST or roll note, jitter.
    pub ticks: Vec<kairos_core::TickExplained>,
    /// Times the spec has that the `[start_at, end_at]` window removes.
    pub outside_window: Vec<kairos_core::OutsideWindow>,
    /// The skips of stored schedule `schedule_id` among the fire times (they will not run).
    pub skips: Vec<kairos_core::Skip>,
}

impl Registrar {
    /// Creates or replaces a schedule (omitted optional fields take their defaults).
    ///
    /// # Errors
    /// [`Error::Invalid`] naming every bad field; [`Error::Conflict`] when `revision` is
    /// given and stale, or a concurrent upsert of the same schedule won; [`Error::Store`].
    pub async fn upsert(&self, input: &ScheduleInput) -> Result<Upserted> {
        let checked = input::check(input, &self.settings).map_err(Error::Invalid)?;
        let mut tx = Tx::begin(&self.pool).await?;
        let upserted = self.upsert_in(&mut tx, checked).await?;
        tx.commit().await?;
        Ok(upserted)
    }

    /// The writes of [`Registrar::upsert`] in the caller's transaction (a dry-run drops it).
    pub(crate) async fn upsert_in(
        &self,
        tx: &mut Tx,
        mut checked: input::Checked,
    ) -> Result<Upserted> {
        let calendars = rules::load(tx, &checked.rules.stored.exclude_calendars).await?;
        checked.resolve(&calendars).map_err(Error::Invalid)?;
        crate::workflows::check_stored(tx, &checked.workflow_id, checked.version).await?;
        let now = self.now(tx).await?;
        crate::chains::check(tx, std::slice::from_ref(&checked), &[], |_| None).await?;
        let existing = store::get(&mut **tx, &checked.schedule_id).await?;
        let plan = apply::plan(&checked, existing.as_ref(), now, &self.settings)
            .map_err(|err| plan_error(err, &checked.schedule_id))?;
        let created = matches!(plan, Plan::New(..));
        let mut stored = apply::apply(tx, vec![plan], now).await?;
        let schedule = stored.pop().expect("one plan, one row");
        let kind = if created {
            ChangeKind::Create
        } else {
            ChangeKind::Update
        };
        let change = self.schedule_change(kind, existing.as_ref(), Some(&schedule));
        history::record(tx, change.as_slice(), now).await?;
        Ok(Upserted { schedule, created })
    }

    /// Pauses (cancelling every unpublished run) or resumes (planning from now on: no
    /// catch-up of the paused span). Setting the state it already has changes nothing.
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`Error::Conflict`] on a concurrent write; [`Error::Store`].
    pub async fn set_paused(&self, schedule_id: &str, paused: bool) -> Result<Schedule> {
        self.set_paused_with_note(schedule_id, paused, None).await
    }

    /// [`Registrar::set_paused`] with a note saying why (at most [`MAX_PAUSE_NOTE_CHARS`]
    /// characters), shown until resume; resume clears it. Pausing a paused schedule with
    /// another note replaces the note.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a note that is too long; as [`Registrar::set_paused`].
    pub async fn set_paused_with_note(
        &self,
        schedule_id: &str,
        paused: bool,
        note: Option<&str>,
    ) -> Result<Schedule> {
        let change = PauseChange {
            paused,
            note,
            until: None,
        };
        self.pause(schedule_id, change, ANONYMOUS).await
    }

    /// Deletes a schedule and cancels its unpublished runs; its run history stays.
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`Error::Store`].
    pub async fn delete(&self, schedule_id: &str) -> Result<()> {
        check_id(schedule_id)?;
        let mut tx = Tx::begin(&self.pool).await?;
        let now = self.now(&mut tx).await?;
        let ids = [schedule_id.to_string()];
        let old = store::get(&mut *tx, schedule_id).await?;
        if store::delete_many(&mut *tx, &ids).await?.is_empty() {
            return Err(not_found(schedule_id));
        }
        runs::cancel_unpublished(&mut *tx, &ids, DELETED, now).await?;
        let change = self.schedule_change(ChangeKind::Delete, old.as_ref(), None);
        history::record(&mut tx, change.as_slice(), now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// A schedule with its next five ticks at or after now and its statistics.
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`Error::Store`].
    pub async fn get(&self, schedule_id: &str) -> Result<ScheduleView> {
        check_id(schedule_id)?;
        let mut conn = Tx::begin(&self.pool).await?;
        let now = self.now(&mut conn).await?;
        let schedule = store::get(&mut *conn, schedule_id)
            .await?
            .ok_or_else(|| not_found(schedule_id))?;
        let jitter_ms = u32::try_from(schedule.jitter_ms).unwrap_or(0);
        let exhausted = schedule.remaining_runs() == Some(0);
        let from = preview_from(&schedule, now);
        let (preview, explained) = match timetable_of(&mut conn, &schedule).await? {
            Some(timetable) if !exhausted => {
                let first = timetable.first_at_or_after(from);
                let rest = first
                    .into_iter()
                    .flat_map(|first| timetable.ticks_after(first));
                let preview: Vec<DateTime<Utc>> =
                    first.into_iter().chain(rest).take(PREVIEW_TICKS).collect();
                let jitter = Some((schedule.schedule_id.as_str(), jitter_ms));
                let explained = preview
                    .iter()
                    .map(|tick| timetable.describe(*tick, jitter))
                    .collect();
                (preview, explained)
            }
            _ => (Vec::new(), Vec::new()),
        };
        let stats = stats::for_schedule(&mut *conn, schedule_id, stats::DEFAULT_WINDOW).await?;
        let waiting_on = crate::chains::waiting_on(&mut conn, &schedule).await?;
        let skips = among(&mut conn, schedule_id, &preview).await?;
        let next_fire = next_fire(&mut conn, &schedule, now).await?;
        Ok(ScheduleView {
            schedule,
            preview,
            stats,
            waiting_on,
            explained,
            skips,
            next_fire,
        })
    }

    /// A page of schedules matching `filter` (its `limit` must be 1..=1000).
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad filter; [`Error::Store`].
    pub async fn list(&self, filter: &ListFilter) -> Result<Page> {
        check_limit(filter.limit)?;
        for (field, value) in [
            ("workflow_id", &filter.workflow_id),
            ("user_id", &filter.user_id),
            ("cursor", &filter.after),
        ] {
            if let Some(value) = value {
                kairos_core::validate_id(field, value)
                    .map_err(|e| Error::invalid(field, e.to_string()))?;
            }
        }
        for (field, value) in [
            ("q", &filter.q),
            ("workflow_id", &filter.workflow_contains),
            ("user_id", &filter.user_contains),
        ] {
            if let Some(value) = value {
                check_search(field, value)?;
            }
        }
        let schedules = store::list(&self.pool, filter).await?;
        let full = i64::try_from(schedules.len()).unwrap_or(i64::MAX) == filter.limit;
        let next_cursor = full
            .then(|| schedules.last().map(|s| s.schedule_id.clone()))
            .flatten();
        let mut tx = Tx::begin(&self.pool).await?;
        let now = self.now(&mut tx).await?;
        let next_fires = next_fires(&mut tx, &schedules, now).await?;
        tx.commit().await?;
        Ok(Page {
            schedules,
            next_fires,
            next_cursor,
        })
    }

    /// A page of a schedule's runs, newest tick first (also after the schedule was
    /// deleted); `cursor` is the previous page's `next_cursor`.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad status, cursor or limit; [`Error::Store`].
    pub async fn runs(
        &self,
        schedule_id: &str,
        status: Option<&str>,
        cursor: Option<&str>,
        limit: i64,
    ) -> Result<RunPage> {
        check_id(schedule_id)?;
        check_limit(limit)?;
        let before = cursor.map(crate::cursor::parse).transpose()?;
        let status = match status.map(str::parse::<RunStatus>).transpose() {
            Ok(status) => status,
            Err(err) => {
                return Err(Error::invalid(
                    "status",
                    format!(
                        "{:?} is not a run status: use one of {}",
                        err.value, err.allowed
                    ),
                ))
            }
        };
        let listed = runs::list_for_schedule(&self.pool, schedule_id, status, before, limit + 1);
        Ok(RunPage::of(listed.await?, limit, |run| Some(run.run_at)))
    }

    /// The fire times of a spec after `after` (default: now on the database clock, as every
    /// fire decision reads it), nothing stored, with named calendars (read from the store)
    /// and what the calendar rules did: excluded times and per-tick notes (rolled, DST rule
    /// applied).
    ///
    /// # Errors
    /// [`Error::Invalid`] naming every bad field (an unknown calendar, an exclusion that
    /// removes every tick); [`Error::Store`].
    pub async fn preview_explained(&self, input: &PreviewInput) -> Result<Preview> {
        let names = input.rules.exclude_calendars.clone().unwrap_or_default();
        let mut tx = Tx::begin(&self.pool).await?;
        let calendars = rules::load(&mut tx, &names).await?;
        let now = self.now(&mut tx).await?;
        let (timetable, after, count) = preview_timetable(&self.settings, input, &calendars, now)?;
        if let Some(problem) = rules::exclusion_problem(&timetable, after) {
            return Err(Error::Invalid(vec![problem]));
        }
        let fire_times: Vec<DateTime<Utc>> = timetable.ticks_after(after).take(count).collect();
        let skips = match &input.schedule_id {
            Some(id) => among(&mut tx, id, &fire_times).await?,
            None => Vec::new(),
        };
        tx.commit().await?;
        let until = fire_times.last().copied().unwrap_or(after);
        let jitter_ms = input
            .jitter_ms
            .and_then(|ms| u32::try_from(ms).ok())
            .unwrap_or(0);
        let jitter = Some((input.schedule_id.as_deref().unwrap_or(""), jitter_ms));
        Ok(Preview {
            ticks: fire_times
                .iter()
                .map(|tick| timetable.describe(*tick, jitter))
                .collect(),
            outside_window: timetable.outside_window(after, count),
            skips,
            excluded: timetable.excluded_between(after, until, PREVIEW_MAX as usize),
            notes: fire_times
                .iter()
                .map(|tick| timetable.explain(*tick))
                .filter(|note| !note.is_plain())
                .collect(),
            fire_times,
        })
    }
}

/// Checks a preview request (no IO) and builds its timetable with the calendars given,
/// from `input.after` or else `now`.
pub(crate) fn preview_timetable(
    settings: &Settings,
    input: &PreviewInput,
    calendars: &rules::Calendars,
    now: DateTime<Utc>,
) -> Result<(Timetable, DateTime<Utc>, usize)> {
    let mut problems = Vec::new();
    let spec = input::within(
        &mut problems,
        "cron_expr",
        &input.cron_expr,
        input::MAX_CRON_EXPR_LEN,
    )
    .then(|| input::parse_spec(&input.cron_expr))
    .and_then(|parsed| {
        parsed
            .map_err(|err| problems.push(Problem::new("cron_expr", err.to_string())))
            .ok()
    });
    let zone = input::within(
        &mut problems,
        "timezone",
        &input.timezone,
        input::MAX_TIMEZONE_LEN,
    )
    .then(|| check_zone(&input.timezone, settings))
    .and_then(|zone| zone.map_err(|p| problems.push(p)).ok());
    if let Some(ms) = input.jitter_ms {
        if !(0..=i64::from(kairos_core::MAX_JITTER_MS)).contains(&ms) {
            problems.push(Problem::new(
                "jitter_ms",
                format!(
                    "{ms} is out of range: must be between 0 and {}",
                    kairos_core::MAX_JITTER_MS
                ),
            ));
        }
    }
    if let Some(seconds) = input.deadline_s {
        let max = i64::from(input::MAX_DEADLINE_S);
        if !(1..=max).contains(&seconds) {
            problems.push(Problem::new(
                "deadline_s",
                format!("{seconds} is out of range: must be between 1 and {max}"),
            ));
        }
    }
    if let Some(id) = &input.schedule_id {
        if let Err(err) = kairos_core::validate_id("schedule_id", id) {
            problems.push(Problem::new("schedule_id", err.to_string()));
        }
    }
    let count = input.count.unwrap_or(5);
    if !(1..=PREVIEW_MAX).contains(&count) {
        problems.push(Problem::new(
            "count",
            format!("{count} is out of range: must be between 1 and {PREVIEW_MAX}"),
        ));
    }
    if let (Some(start), Some(end)) = (input.start_at, input.end_at) {
        if end < start {
            problems.push(Problem::new("end_at", "is before start_at"));
        }
    }
    let checked = rules::check(&input.rules, spec.as_ref(), &mut problems);
    let named = rules::resolve(&checked.stored, calendars).unwrap_or_else(|found| {
        problems.extend(found);
        Vec::new()
    });
    let (Some(spec), Some(zone), true) = (spec, zone, problems.is_empty()) else {
        return Err(Error::Invalid(problems));
    };
    let after = input.after.unwrap_or(now);
    let window = (input.start_at, input.end_at);
    let timetable = checked
        .with(spec, zone, after, window)
        .timetable_with(named);
    let count = usize::try_from(count).expect("checked positive");
    Ok((timetable, after, count))
}
