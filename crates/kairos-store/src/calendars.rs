//! Statements on `calendars` (named sets of excluded dates, read as `kairos_core::Calendar`)
//! and `schedule_calendars` (which schedule uses which).

use std::collections::HashMap;

use chrono::{DateTime, NaiveDate, Utc};
use kairos_core::Calendar;
use sqlx::{FromRow, PgExecutor, Row};

use crate::rows::CalendarRow;
use crate::Result;

const COLUMNS: &str = "name, description, dates, revision, created_at, updated_at";

/// Creates or replaces a calendar (dates sorted, duplicates dropped). Returns the row and
/// whether it was created.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn put(
    db: impl PgExecutor<'_>,
    name: &str,
    description: &str,
    dates: &[NaiveDate],
    now: DateTime<Utc>,
) -> Result<(Calendar, bool)> {
    let sql = format!(
        "insert into calendars (name, description, dates, created_at, updated_at) \
         values ($1, $2, array(select distinct d from unnest($3::date[]) as d order by d), $4, $4) \
         on conflict (name) do update set description = excluded.description, \
           dates = excluded.dates, revision = calendars.revision + 1, updated_at = $4 \
         returning {COLUMNS}, (xmax = 0) as created"
    );
    let row = sqlx::query(&sql)
        .bind(name)
        .bind(description)
        .bind(dates)
        .bind(now)
        .fetch_one(db)
        .await?;
    let created: bool = row.try_get("created")?;
    Ok((CalendarRow::from_row(&row)?.0, created))
}

/// One calendar by name.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn get(db: impl PgExecutor<'_>, name: &str) -> Result<Option<Calendar>> {
    let sql = format!("select {COLUMNS} from calendars where name = $1");
    let row: Option<CalendarRow> = sqlx::query_as(&sql).bind(name).fetch_optional(db).await?;
    Ok(row.map(Calendar::from))
}

/// Every calendar, by name (calendars are few: one per business region).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<Calendar>> {
    let sql = format!("select {COLUMNS} from calendars order by name");
    let rows: Vec<CalendarRow> = sqlx::query_as(&sql).fetch_all(db).await?;
    Ok(rows.into_iter().map(Calendar::from).collect())
}

/// The dates of the calendars named (missing names are absent from the answer), in one
/// statement: what the planner loads for a whole batch.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn dates_of(
    db: impl PgExecutor<'_>,
    names: &[String],
) -> Result<HashMap<String, Vec<NaiveDate>>> {
    if names.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<(String, Vec<NaiveDate>)> =
        sqlx::query_as("select name, dates from calendars where name = any($1)")
            .bind(names)
            .fetch_all(db)
            .await?;
    Ok(rows.into_iter().collect())
}

/// Locks a calendar row until the transaction ends (a calendar write and the schedule
/// writes that read it serialize on it). Returns whether it exists.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn lock(db: impl PgExecutor<'_>, names: &[String]) -> Result<Vec<String>> {
    Ok(sqlx::query_scalar(
        "select name from calendars where name = any($1) order by name for share",
    )
    .bind(names)
    .fetch_all(db)
    .await?)
}

/// Deletes a calendar; returns whether it existed. Fails (foreign key) while a schedule
/// uses it: check [`schedules_using`] first.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn delete(db: impl PgExecutor<'_>, name: &str) -> Result<bool> {
    let done = sqlx::query("delete from calendars where name = $1")
        .bind(name)
        .execute(db)
        .await?;
    Ok(done.rows_affected() > 0)
}

/// The schedules that use calendar `name`, by id.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn schedules_using(db: impl PgExecutor<'_>, name: &str) -> Result<Vec<String>> {
    Ok(sqlx::query_scalar(
        "select schedule_id from schedule_calendars where calendar_name = $1 order by schedule_id",
    )
    .bind(name)
    .fetch_all(db)
    .await?)
}

/// Makes `(schedule_id, calendar names)` the calendar sets of those schedules, in two
/// statements.
///
/// # Errors
/// [`crate::Error::Database`] when a statement fails (an unknown calendar: foreign key).
pub async fn set_for_schedules(
    conn: &mut sqlx::PgConnection,
    sets: &[(String, Vec<String>)],
) -> Result<()> {
    if sets.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = sets.iter().map(|(id, _)| id.clone()).collect();
    sqlx::query("delete from schedule_calendars where schedule_id = any($1)")
        .bind(&ids)
        .execute(&mut *conn)
        .await?;
    let (schedule_ids, names): (Vec<String>, Vec<String>) = sets
        .iter()
        .flat_map(|(id, names)| names.iter().map(move |n| (id.clone(), n.clone())))
        .unzip();
    if !schedule_ids.is_empty() {
        sqlx::query(
            "insert into schedule_calendars (schedule_id, calendar_name) \
             select * from unnest($1::text[], $2::text[]) on conflict do nothing",
        )
        .bind(&schedule_ids)
        .bind(&names)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}
