//! A `calendars` row read into [`Calendar`], and a schedule's calendar columns into
//! [`CalendarRules`].

use kairos_core::{Calendar, CalendarRules};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{FromRow, Row};

use super::{named, named_or_null};

/// A schedule's `exclude`, `exclude_calendars`, `roll`, `dst_gap` and `dst_fold`.
pub(crate) struct RulesRow(pub(crate) CalendarRules);

impl<'r> FromRow<'r, PgRow> for RulesRow {
    fn from_row(row: &'r PgRow) -> sqlx::Result<Self> {
        let list = |column: &str| -> sqlx::Result<Vec<String>> {
            let Json(items) = row.try_get::<Json<Vec<String>>, _>(column)?;
            Ok(items)
        };
        Ok(RulesRow(CalendarRules {
            exclude: list("exclude")?,
            exclude_calendars: list("exclude_calendars")?,
            roll: named(row, "roll")?,
            dst_gap: named_or_null(row, "dst_gap")?,
            dst_fold: named_or_null(row, "dst_fold")?,
        }))
    }
}

impl From<RulesRow> for CalendarRules {
    fn from(row: RulesRow) -> CalendarRules {
        row.0
    }
}

/// Every column of `calendars`.
pub(crate) struct CalendarRow(pub(crate) Calendar);

impl<'r> FromRow<'r, PgRow> for CalendarRow {
    fn from_row(row: &'r PgRow) -> sqlx::Result<Self> {
        Ok(CalendarRow(Calendar {
            name: row.try_get("name")?,
            description: row.try_get("description")?,
            dates: row.try_get("dates")?,
            revision: row.try_get("revision")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
        }))
    }
}

impl From<CalendarRow> for Calendar {
    fn from(row: CalendarRow) -> Calendar {
        row.0
    }
}
