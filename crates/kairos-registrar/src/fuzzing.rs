//! Entry points for the fuzz targets (`fuzz/` at the project root): the registrar's checks
//! that need no database, each returning the problems it found. Not part of the API.

use chrono::{DateTime, Utc};

use crate::error::{Error, Problem};
use crate::{input, rules, schedules, workflows, CalendarInput, PreviewInput, ScheduleInput};
use crate::{Settings, WorkflowInput};

/// The problems of an upsert (or of one schedule of a deploy).
pub fn check_schedule(input: &ScheduleInput, settings: &Settings) -> Vec<Problem> {
    input::check(input, settings).err().unwrap_or_default()
}

/// The problems of a deploy (path, DAG, every schedule) found without the database.
pub fn check_workflow(input: &WorkflowInput, settings: &Settings) -> Vec<Problem> {
    problems(workflows::check_workflow(settings, input).map(|_| ()))
}

/// The problems of a calendar write found without the database.
pub fn check_calendar(input: &CalendarInput) -> Vec<Problem> {
    problems(crate::calendars::check_calendar(input).map(|_| ()))
}

/// The fire times of a preview without named calendars (an unknown name is a problem),
/// or its problems.
pub fn preview(
    input: &PreviewInput,
    settings: &Settings,
) -> Result<Vec<DateTime<Utc>>, Vec<Problem>> {
    let now = settings.pinned_now.unwrap_or_else(Utc::now);
    let (timetable, after, count) =
        schedules::preview_timetable(settings, input, &rules::Calendars::new(), now)
            .map_err(|err| problems(Err(err)))?;
    Ok(timetable.ticks_after(after).take(count).collect())
}

fn problems(result: crate::Result<()>) -> Vec<Problem> {
    match result {
        Ok(()) => Vec::new(),
        Err(Error::Invalid(problems)) => problems,
        Err(other) => vec![Problem::new("", other.to_string())],
    }
}
