//! The rows sqlx reads, each a local newtype over the core value it decodes into
//! (`kairos_core::Schedule`, `Run`, `Attempt`, `Calendar` and their parts): the one place
//! where columns become the core's types on the way in, so that no row type leaves the
//! store. Statements read `query_as::<_, ScheduleRow>` and hand out `Schedule`; writes
//! bind the core's values directly.

mod calendar;
mod run;
mod schedule;

use std::str::FromStr;

use sqlx::postgres::PgRow;
use sqlx::Row;

pub(crate) use calendar::{CalendarRow, RulesRow};
pub(crate) use run::{AttemptRow, RunRow};
pub(crate) use schedule::{FailureRow, ScheduleRow};

/// A text column that names a core enum (a status, a source, a policy), parsed with its
/// names; a name it does not know is an error naming the column.
fn named<T: FromStr>(row: &PgRow, column: &str) -> sqlx::Result<T>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    let text: String = row.try_get(column)?;
    parse(column, text)
}

/// As [`named`], for a nullable column.
fn named_or_null<T: FromStr>(row: &PgRow, column: &str) -> sqlx::Result<Option<T>>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    let text: Option<String> = row.try_get(column)?;
    text.map(|text| parse(column, text)).transpose()
}

fn parse<T: FromStr>(column: &str, text: String) -> sqlx::Result<T>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    text.parse().map_err(|err| sqlx::Error::ColumnDecode {
        index: column.to_string(),
        source: Box::new(err),
    })
}
