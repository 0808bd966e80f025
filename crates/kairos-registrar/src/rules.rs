//! A schedule's calendar rules (`exclude`, `exclude_calendars`, `roll`, `dst_gap`,
//! `dst_fold`): checked field by field without the database, then resolved against the
//! stored calendars (one statement for all the names of a request or a stored set).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use kairos_core::{
    validate_id, CalendarRules, Exclusion, Exclusions, NamedCalendar, ScheduleRules, Spec,
    Timetable, Tz, MAX_EXCLUDE_ENTRIES,
};
use kairos_store::calendars;
use kairos_store::Tx;

use crate::error::{Problem, Result};

/// The calendar fields of an upsert or preview body, as sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RulesInput {
    /// Dates, date ranges or cron expressions to exclude.
    pub exclude: Option<Vec<String>>,
    /// Names of stored calendars whose dates are excluded.
    pub exclude_calendars: Option<Vec<String>>,
    /// `none`, `forward` or `backward`.
    pub roll: Option<String>,
    /// `shift` or `skip`; absent: docs/design.md §4 for the job's kind.
    pub dst_gap: Option<String>,
    /// `first`, `last` or `both`; absent: docs/design.md §4 for the job's kind.
    pub dst_fold: Option<String>,
}

/// Rules that passed every check that needs no database.
#[derive(Debug, Clone, Default)]
pub(crate) struct CheckedRules {
    /// As stored.
    pub stored: CalendarRules,
    /// The parsed `exclude` entries.
    pub entries: Vec<Exclusion>,
}

/// Checks each field; problems name `exclude[i]`, `exclude_calendars[i]`, `roll`, ...
pub(crate) fn check(
    input: &RulesInput,
    spec: Option<&Spec>,
    problems: &mut Vec<Problem>,
) -> CheckedRules {
    let mut rules = CheckedRules::default();
    let exclude = input.exclude.as_deref().unwrap_or_default();
    if exclude.len() > MAX_EXCLUDE_ENTRIES {
        problems.push(Problem::new(
            "exclude",
            format!("{} entries is more than the {MAX_EXCLUDE_ENTRIES} allowed; put dates in a calendar", exclude.len()),
        ));
    }
    for (index, text) in exclude.iter().enumerate() {
        match Exclusion::parse(text) {
            Ok(entry) => {
                rules.stored.exclude.push(entry.as_str().to_string());
                rules.entries.push(entry);
            }
            Err(err) => problems.push(Problem::new(format!("exclude[{index}]"), err.to_string())),
        }
    }
    for (index, name) in input.exclude_calendars.iter().flatten().enumerate() {
        let field = format!("exclude_calendars[{index}]");
        if let Err(err) = validate_id("calendar name", name) {
            problems.push(Problem::new(field, err.to_string()));
        } else if rules.stored.exclude_calendars.contains(name) {
            problems.push(Problem::new(field, format!("{name:?} is listed twice")));
        } else {
            rules.stored.exclude_calendars.push(name.clone());
        }
    }
    let cron = spec.is_none_or(|spec| spec.job_kind().is_some());
    let mut policy = |field: &str, given: bool| {
        if given && !cron {
            problems.push(Problem::new(
                field,
                "applies to cron specs only: @every and @at ticks are instants, not wall times",
            ));
        }
    };
    policy("roll", input.roll.as_deref().is_some_and(|r| r != "none"));
    policy("dst_gap", input.dst_gap.is_some());
    policy("dst_fold", input.dst_fold.is_some());
    if let Some(roll) = parse(problems, input.roll.as_deref()) {
        rules.stored.roll = roll;
    }
    rules.stored.dst_gap = parse(problems, input.dst_gap.as_deref());
    rules.stored.dst_fold = parse(problems, input.dst_fold.as_deref());
    rules
}

fn parse<P: std::str::FromStr<Err = kairos_core::PolicyError>>(
    problems: &mut Vec<Problem>,
    value: Option<&str>,
) -> Option<P> {
    match value?.parse() {
        Ok(policy) => Some(policy),
        Err(err) => {
            problems.push(Problem::new(err.field, err.to_string()));
            None
        }
    }
}

/// Stored calendars by name.
pub(crate) use kairos_core::Calendars;

/// Loads (and share-locks, so a concurrent calendar write waits for this transaction) the
/// calendars named, in one statement.
///
/// # Errors
/// [`crate::Error::Store`].
pub(crate) async fn load(tx: &mut Tx, names: &[String]) -> Result<Calendars> {
    let mut names = names.to_vec();
    names.sort();
    names.dedup();
    if names.is_empty() {
        return Ok(Calendars::new());
    }
    calendars::lock(&mut **tx, &names).await?;
    let dates = calendars::dates_of(&mut **tx, &names).await?;
    Ok(dates
        .into_iter()
        .filter_map(|(name, dates)| {
            NamedCalendar::new(name.clone(), dates)
                .ok()
                .map(|calendar| (name, Arc::new(calendar)))
        })
        .collect())
}

/// The calendars a schedule names, or a problem per unknown name.
pub(crate) fn resolve(
    rules: &CalendarRules,
    calendars: &Calendars,
) -> std::result::Result<Vec<Arc<NamedCalendar>>, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut found = Vec::new();
    for (index, name) in rules.exclude_calendars.iter().enumerate() {
        match calendars.get(name) {
            Some(calendar) => found.push(calendar.clone()),
            None => problems.push(Problem::new(
                format!("exclude_calendars[{index}]"),
                format!("no calendar is named {name:?} (create it with PUT /calendars/{name})"),
            )),
        }
    }
    if problems.is_empty() {
        Ok(found)
    } else {
        Err(problems)
    }
}

impl CheckedRules {
    /// The schedule's whole timing rules: these with its spec, zone, `@every` anchor and
    /// window.
    pub(crate) fn with(
        &self,
        spec: Spec,
        zone: Tz,
        anchor: DateTime<Utc>,
        window: (Option<DateTime<Utc>>, Option<DateTime<Utc>>),
    ) -> ScheduleRules {
        ScheduleRules {
            spec,
            zone,
            anchor,
            start_at: window.0,
            end_at: window.1,
            exclude: self.entries.clone(),
            calendars: self.stored.exclude_calendars.clone(),
            roll: self.stored.roll,
            dst_gap: self.stored.dst_gap,
            dst_fold: self.stored.dst_fold,
        }
    }
}

/// Why a timetable with exclusions has no first tick, or has a tick that cannot roll: the
/// problem names the calendar field responsible; `None` when the spec itself never fires.
pub(crate) fn exclusion_problem(timetable: &Timetable, now: DateTime<Utc>) -> Option<Problem> {
    if let Some(date) = timetable.unrollable_date(now) {
        return Some(Problem::new(
            "roll",
            format!(
                "the tick on {date} finds no date that is not excluded within {} days",
                kairos_core::MAX_ROLL_DAYS
            ),
        ));
    }
    if timetable.first_at_or_after(now).is_some() || timetable.exclusions().is_empty() {
        return None;
    }
    let unexcluded = timetable.clone().exclude(Exclusions::default());
    unexcluded.first_at_or_after(now)?;
    Some(Problem::new(
        "exclude",
        format!(
            "removes every tick at or after {} (with exclude_calendars): the schedule would never fire",
            rfc3339(now)
        ),
    ))
}

/// RFC 3339 in UTC with `Z`, fractions only when present.
pub fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}
