//! Named calendars (`PUT/GET/DELETE /calendars/{name}`, `GET /calendars`): a set of
//! excluded dates that schedules reference by name in `exclude_calendars`.
//!
//! Changing a calendar re-plans every schedule that uses it, in the same transaction, as a
//! spec change does: `next_run_at` is recomputed from now, unpublished runs on newly
//! excluded dates are cancelled and cancelled runs whose tick is back are restored. A
//! change that would leave a schedule with no tick (or a tick that cannot roll) is refused.

use chrono::NaiveDate;
use kairos_core::{
    calendar_fields, parse_date, validate_id, Calendar, ChangeKind, Subject, MAX_CALENDAR_DATES,
};
use kairos_store::calendars;
use kairos_store::schedules as store;
use kairos_store::Tx;

use crate::apply::{self, Target};
use crate::error::{Error, Problem, Result};
use crate::input::first_tick;
use crate::timetables::timetable_with;
use crate::{rules, Registrar};

/// Longest calendar description.
pub const MAX_DESCRIPTION_CHARS: usize = 1_000;

/// The body of `PUT /calendars/{name}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CalendarInput {
    /// From the path.
    pub name: String,
    /// `YYYY-MM-DD` dates, at most 10,000.
    pub dates: Vec<String>,
    /// Free text; absent: empty.
    pub description: Option<String>,
}

/// What a calendar write did.
#[derive(Debug, Clone)]
pub struct CalendarWritten {
    /// The row as stored.
    pub calendar: Calendar,
    /// True when it did not exist before.
    pub created: bool,
    /// The schedules re-planned because they use it.
    pub replanned: Vec<String>,
}

impl Registrar {
    /// Creates or replaces a calendar and re-plans the schedules that use it.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming `name`, `dates[i]`, `dates` or `description`, or a schedule
    /// the new dates would leave without a tick; [`Error::Store`].
    pub async fn put_calendar(&self, input: &CalendarInput) -> Result<CalendarWritten> {
        let (dates, description) = check_calendar(input)?;
        let mut tx = Tx::begin(&self.pool).await?;
        let now = self.now(&mut tx).await?;
        let before = calendars::get(&mut *tx, &input.name).await?;
        let (calendar, created) =
            calendars::put(&mut *tx, &input.name, &description, &dates, now).await?;
        let replanned = self.replan_users(&mut tx, &input.name, now).await?;
        let fields = calendar_fields(before.as_ref(), Some(&calendar));
        if !fields.is_empty() {
            let kind = if created {
                ChangeKind::Create
            } else {
                ChangeKind::Update
            };
            let change = self.change(Subject::calendar(&input.name), kind, fields);
            crate::history::record(&mut tx, &[change], now).await?;
        }
        tx.commit().await?;
        Ok(CalendarWritten {
            calendar,
            created,
            replanned,
        })
    }

    /// Re-plans every unpaused schedule that uses calendar `name` (already written in `tx`).
    async fn replan_users(
        &self,
        tx: &mut Tx,
        name: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<String>> {
        let ids = calendars::schedules_using(&mut **tx, name).await?;
        let schedules = store::get_many(&mut **tx, &ids).await?;
        let names: Vec<String> = schedules
            .iter()
            .flat_map(|s| s.rules.exclude_calendars.iter().cloned())
            .collect();
        let calendars = rules::load(tx, &names).await?;
        let (mut retimed, mut next_run_ats, mut targets) = (Vec::new(), Vec::new(), Vec::new());
        for schedule in schedules.iter().filter(|s| !s.paused) {
            let Some(timetable) = timetable_with(schedule, &calendars) else {
                continue;
            };
            let next = first_tick(&timetable, now, &self.settings).map_err(|problem| {
                Error::invalid(
                    "dates",
                    format!(
                        "would leave schedule {:?} unable to fire ({}: {})",
                        schedule.schedule_id, problem.field, problem.rule
                    ),
                )
            })?;
            retimed.push(schedule.schedule_id.clone());
            next_run_ats.push(Some(next));
            targets.push(Target {
                schedule_id: schedule.schedule_id.clone(),
                timetable: Some(timetable),
                jitter_ms: u32::try_from(schedule.jitter_ms).unwrap_or(0),
            });
        }
        store::retime(&mut **tx, &retimed, &next_run_ats, now).await?;
        apply::reconcile(tx, &targets, now).await?;
        Ok(retimed)
    }

    /// One calendar.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad name; [`Error::NotFound`]; [`Error::Store`].
    pub async fn get_calendar(&self, name: &str) -> Result<Calendar> {
        check_name(name)?;
        calendars::get(&self.pool, name)
            .await?
            .ok_or_else(|| not_found(name))
    }

    /// Every calendar, by name.
    ///
    /// # Errors
    /// [`Error::Store`].
    pub async fn list_calendars(&self) -> Result<Vec<Calendar>> {
        Ok(calendars::list(&self.pool).await?)
    }

    /// Deletes a calendar no schedule uses.
    ///
    /// # Errors
    /// [`Error::Conflict`] naming the schedules that use it; [`Error::NotFound`];
    /// [`Error::Store`].
    pub async fn delete_calendar(&self, name: &str) -> Result<()> {
        check_name(name)?;
        let mut tx = Tx::begin(&self.pool).await?;
        // Locks the row so that no upsert can start using it before the delete commits.
        calendars::lock(&mut *tx, &[name.to_string()]).await?;
        let users = calendars::schedules_using(&mut *tx, name).await?;
        if !users.is_empty() {
            let shown: Vec<&str> = users.iter().take(10).map(String::as_str).collect();
            return Err(Error::Conflict {
                detail: format!(
                    "calendar {name:?} is used by {} schedule(s) ({}); remove it from their \
                     exclude_calendars first",
                    users.len(),
                    shown.join(", ")
                ),
            });
        }
        let before = calendars::get(&mut *tx, name).await?;
        if !calendars::delete(&mut *tx, name).await? {
            return Err(not_found(name));
        }
        let now = self.now(&mut tx).await?;
        let fields = calendar_fields(before.as_ref(), None);
        let change = self.change(Subject::calendar(name), ChangeKind::Delete, fields);
        crate::history::record(&mut tx, &[change], now).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// Checks a calendar request (no IO): its name, every date and the description.
pub(crate) fn check_calendar(input: &CalendarInput) -> Result<(Vec<NaiveDate>, String)> {
    let mut problems = Vec::new();
    if let Err(err) = validate_id("name", &input.name) {
        problems.push(Problem::new("name", err.to_string()));
    }
    let mut dates = Vec::with_capacity(input.dates.len());
    for (index, text) in input.dates.iter().enumerate() {
        match parse_date(text) {
            Ok(date) => dates.push(date),
            Err(err) => problems.push(Problem::new(format!("dates[{index}]"), err.to_string())),
        }
    }
    if input.dates.len() > MAX_CALENDAR_DATES {
        problems.push(Problem::new(
            "dates",
            format!(
                "{} dates is more than the {MAX_CALENDAR_DATES} a calendar may hold",
                input.dates.len()
            ),
        ));
    }
    let description = input.description.clone().unwrap_or_default();
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        problems.push(Problem::new(
            "description",
            format!("is longer than {MAX_DESCRIPTION_CHARS} characters"),
        ));
    }
    if !problems.is_empty() {
        return Err(Error::Invalid(problems));
    }
    Ok((dates, description))
}

fn check_name(name: &str) -> Result<()> {
    validate_id("name", name).map_err(|err| Error::invalid("name", err.to_string()))
}

fn not_found(name: &str) -> Error {
    Error::NotFound {
        what: format!("calendar {name:?}"),
    }
}
