//! A stored schedule's timing columns (`cron_expr`, `timezone`, window, `created_at` and
//! the calendar rules) decoded into the core's [`ScheduleRules`], here and nowhere above
//! the store. A value that no longer parses (a stricter core than the one that stored it)
//! is an error naming its column: such a schedule plans and previews nothing. [`chain`]
//! reads a chained schedule's parent from its spec.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use kairos_core::{parse_zone, CalendarRules, Chain, Exclusion, Schedule, ScheduleRules, Spec, Tz};

use crate::planning::DueSchedule;

/// The timing columns of one schedule row.
struct Columns<'a> {
    cron_expr: &'a str,
    timezone: &'a str,
    created_at: DateTime<Utc>,
    start_at: Option<DateTime<Utc>>,
    end_at: Option<DateTime<Utc>>,
    rules: &'a CalendarRules,
}

/// Decodes rows, parsing each distinct spec and zone once (a burst's schedules mostly
/// share a handful).
#[derive(Debug, Default)]
pub struct Decoder {
    parsed: HashMap<(String, String), Result<(Spec, Tz), String>>,
}

impl Decoder {
    /// The rules of a claimed schedule.
    ///
    /// # Errors
    /// What no longer parses, with its column (`cron_expr: …`, `timezone: …`, `exclude: …`).
    pub fn due(&mut self, row: &DueSchedule) -> Result<ScheduleRules, String> {
        self.decode(&Columns {
            cron_expr: &row.cron_expr,
            timezone: &row.timezone,
            created_at: row.created_at,
            start_at: row.start_at,
            end_at: row.end_at,
            rules: &row.rules,
        })
    }

    /// The rules of a stored schedule.
    ///
    /// # Errors
    /// As [`Decoder::due`].
    pub fn schedule(&mut self, row: &Schedule) -> Result<ScheduleRules, String> {
        self.decode(&Columns {
            cron_expr: &row.cron_expr,
            timezone: &row.timezone,
            created_at: row.created_at,
            start_at: row.start_at,
            end_at: row.end_at,
            rules: &row.rules,
        })
    }

    fn decode(&mut self, row: &Columns<'_>) -> Result<ScheduleRules, String> {
        let (spec, zone) = self
            .parsed
            .entry((row.cron_expr.to_string(), row.timezone.to_string()))
            .or_insert_with(|| spec_and_zone(row.cron_expr, row.timezone))
            .clone()?;
        let exclude = row
            .rules
            .exclude
            .iter()
            .map(|text| Exclusion::parse(text).map_err(|err| format!("exclude: {err}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ScheduleRules {
            spec,
            zone,
            anchor: row.created_at,
            start_at: row.start_at,
            end_at: row.end_at,
            exclude,
            calendars: row.rules.exclude_calendars.clone(),
            roll: row.rules.roll,
            dst_gap: row.rules.dst_gap,
            dst_fold: row.rules.dst_fold,
        })
    }
}

fn spec_and_zone(cron_expr: &str, timezone: &str) -> Result<(Spec, Tz), String> {
    let spec = Spec::parse(cron_expr).map_err(|err| format!("cron_expr: {err}"))?;
    let zone = parse_zone(timezone).map_err(|err| format!("timezone: {err}"))?;
    Ok((spec, zone))
}

/// The parent and outcome of a chained schedule (`@after`); `None` for a timetable.
pub fn chain(schedule: &Schedule) -> Option<Chain> {
    Spec::parse(&schedule.cron_expr).ok()?.chain().cloned()
}
