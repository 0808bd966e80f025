//! A schedule's timing rules as one value: everything its timetable is built from. Planning,
//! previews, explanations and dry-runs all build a stored schedule's timetable here, so
//! what a preview shows is what the planner plans.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::{DstFold, DstGap, Exclusion, Exclusions, NamedCalendar, Roll, Spec, Timetable};

/// Calendars by name, each shared by every schedule that names it.
pub type Calendars = HashMap<String, Arc<NamedCalendar>>;

/// The timing rules of one schedule, parsed.
#[derive(Debug, Clone)]
pub struct ScheduleRules {
    /// The spec.
    pub spec: Spec,
    /// The zone its wall times are in.
    pub zone: Tz,
    /// Where `@every` counts from when there is no `start_at` (the schedule's creation).
    pub anchor: DateTime<Utc>,
    /// Window start (inclusive; also the `@every` anchor).
    pub start_at: Option<DateTime<Utc>>,
    /// Window end (inclusive).
    pub end_at: Option<DateTime<Utc>>,
    /// The schedule's own exclusions.
    pub exclude: Vec<Exclusion>,
    /// The names of the calendars whose dates it excludes.
    pub calendars: Vec<String>,
    /// Business-day rolling.
    pub roll: Roll,
    /// Its own gap rule; `None`: docs/design.md §4 for its kind.
    pub dst_gap: Option<DstGap>,
    /// Its own fold rule; `None`: docs/design.md §4 for its kind.
    pub dst_fold: Option<DstFold>,
}

/// A calendar the rules name is not among those given (it was deleted, or not loaded).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("exclude_calendars: no calendar named {0:?}")]
pub struct MissingCalendar(pub String);

impl ScheduleRules {
    /// The timetable these rules describe, with the calendars they name taken from
    /// `calendars`.
    ///
    /// # Errors
    /// [`MissingCalendar`] when a calendar they name is not in `calendars`.
    pub fn timetable(&self, calendars: &Calendars) -> Result<Timetable, MissingCalendar> {
        let named = self
            .calendars
            .iter()
            .map(|name| {
                calendars
                    .get(name)
                    .cloned()
                    .ok_or_else(|| MissingCalendar(name.clone()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(self.timetable_with(named))
    }

    /// The timetable these rules describe, with the calendars they name already found
    /// (`named`, as a registrar checking a write finds them).
    pub fn timetable_with(&self, named: Vec<Arc<NamedCalendar>>) -> Timetable {
        Timetable::new(self.spec.clone(), self.zone, self.anchor)
            .window(self.start_at, self.end_at)
            .exclude(Exclusions::new(self.exclude.clone(), named))
            .roll(self.roll)
            .dst(self.dst_gap, self.dst_fold)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{NaiveDate, TimeZone};

    fn rules(calendars: Vec<String>) -> ScheduleRules {
        ScheduleRules {
            spec: Spec::parse("0 9 * * *").expect("spec"),
            zone: chrono_tz::Europe::Berlin,
            anchor: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
            start_at: None,
            end_at: None,
            exclude: vec![Exclusion::parse("2026-03-02").expect("entry")],
            calendars,
            roll: Roll::None,
            dst_gap: None,
            dst_fold: None,
        }
    }

    #[test]
    fn exclusions_and_named_calendars_both_apply() {
        let holiday = NaiveDate::from_ymd_opt(2026, 3, 3).unwrap();
        let calendar = NamedCalendar::new("h", vec![holiday]).expect("calendar");
        let calendars = Calendars::from([("h".to_string(), Arc::new(calendar))]);
        let timetable = rules(vec!["h".into()])
            .timetable(&calendars)
            .expect("timetable");
        let after = Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap();
        let next = timetable.next_after(after).expect("a tick");
        // 2 March is excluded by the schedule, 3 March by the calendar.
        assert_eq!(next, Utc.with_ymd_and_hms(2026, 3, 4, 8, 0, 0).unwrap());
    }

    #[test]
    fn a_calendar_not_given_is_named() {
        let err = rules(vec!["gone".into()])
            .timetable(&Calendars::new())
            .expect_err("missing");
        assert_eq!(
            err.to_string(),
            "exclude_calendars: no calendar named \"gone\""
        );
    }
}
