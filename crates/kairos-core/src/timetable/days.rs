//! The dates a cron job fires on once exclusions and `roll` are applied.
//!
//! A cron calendar has the same times of day on every matching date, so excluding whole
//! dates and rolling are rules about *dates*: a tick on an excluded date either disappears
//! (`roll: none`) or moves to the same wall time on the nearest date that is not excluded
//! (`forward`: the next one, `backward`: the previous one), at most [`MAX_ROLL_DAYS`] away.
//! Every tick of one date moves to the same date, and ticks that land on one wall time
//! are one tick. So the fired dates are:
//! - `none`: matching dates that are not excluded;
//! - `forward`: dates that are not excluded and either match or follow a run of excluded
//!   dates that starts with (or contains) a matching date, within 366 days;
//! - `backward`: the same, looking ahead.

use chrono::{Datelike, Duration, NaiveDate};

use crate::exclusion::Exclusions;
use crate::spec::{Calendar, Days, HORIZON_YEAR};
use crate::Roll;

/// How far a tick may roll; a tick with no free date this close is dropped (and a
/// schedule whose ticks would be is refused by the registrar).
pub const MAX_ROLL_DAYS: i64 = 366;

/// The dates of a calendar minus excluded ones, rolled or not.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RolledDays<'a> {
    pub(crate) exclusions: &'a Exclusions,
    pub(crate) roll: Roll,
}

impl Days for RolledDays<'_> {
    fn first_day_at_or_after(&self, calendar: &Calendar, from: NaiveDate) -> Option<NaiveDate> {
        match self.roll {
            Roll::None => self.unrolled(calendar, from),
            Roll::Forward => self.forward(calendar, from),
            Roll::Backward => self.backward(calendar, from),
        }
    }
}

impl RolledDays<'_> {
    fn excluded(&self, date: NaiveDate) -> bool {
        self.exclusions.excludes_date(date)
    }

    fn unrolled(&self, calendar: &Calendar, from: NaiveDate) -> Option<NaiveDate> {
        let mut date = from;
        loop {
            date = calendar.first_matching_day(date)?;
            if !self.excluded(date) {
                return Some(date);
            }
            date = date.succ_opt()?;
        }
    }

    fn forward(&self, calendar: &Calendar, from: NaiveDate) -> Option<NaiveDate> {
        let mut date = from;
        while date.year() <= HORIZON_YEAR {
            if self.excluded(date) {
                date = date.succ_opt()?;
                continue;
            }
            if calendar.day_matches(date) || self.rolls_forward_onto(calendar, date) {
                return Some(date);
            }
            // A free date that does not match ends every run of excluded dates: the next
            // fired date is a matching one.
            date = calendar.first_matching_day(date.succ_opt()?)?;
        }
        None
    }

    /// Whether a tick of an excluded matching date before the free `date` rolls onto it.
    fn rolls_forward_onto(&self, calendar: &Calendar, date: NaiveDate) -> bool {
        (1..=MAX_ROLL_DAYS)
            .map(|back| date - Duration::days(back))
            .take_while(|earlier| self.excluded(*earlier))
            .any(|earlier| calendar.day_matches(earlier))
    }

    fn backward(&self, calendar: &Calendar, from: NaiveDate) -> Option<NaiveDate> {
        let mut date = from;
        while date.year() <= HORIZON_YEAR {
            if !self.excluded(date)
                && (calendar.day_matches(date) || self.rolls_backward_onto(calendar, date))
            {
                return Some(date);
            }
            // Between here and the next matching date, only the date an excluded matching
            // date rolls back to can fire.
            let next = calendar.first_matching_day(date.succ_opt()?)?;
            date = match self.free_date_before(next) {
                Some(target) if self.excluded(next) && target > date => target,
                _ => next,
            };
        }
        None
    }

    /// Whether a tick of an excluded matching date after the free `date` rolls back onto it.
    fn rolls_backward_onto(&self, calendar: &Calendar, date: NaiveDate) -> bool {
        (1..=MAX_ROLL_DAYS)
            .map(|ahead| date + Duration::days(ahead))
            .take_while(|later| self.excluded(*later))
            .any(|later| calendar.day_matches(later))
    }

    /// The last date before `date`, at most [`MAX_ROLL_DAYS`] back, that is not excluded.
    fn free_date_before(&self, date: NaiveDate) -> Option<NaiveDate> {
        (1..=MAX_ROLL_DAYS)
            .map(|back| date - Duration::days(back))
            .find(|earlier| !self.excluded(*earlier))
    }

    /// Where a tick on `date` goes: `date` itself when it is not excluded, else the nearest
    /// free date in the roll's direction (`None`: removed, or no free date close enough).
    pub(crate) fn target(&self, date: NaiveDate) -> Option<NaiveDate> {
        if !self.excluded(date) {
            return Some(date);
        }
        let step = match self.roll {
            Roll::None => return None,
            Roll::Forward => 1,
            Roll::Backward => -1,
        };
        (1..=MAX_ROLL_DAYS)
            .map(|n| date + Duration::days(n * step))
            .find(|other| !self.excluded(*other))
    }
}
