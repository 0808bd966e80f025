//! Statements on `workflows`: DAG JSON per `(workflow_id, version)`, immutable once written.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use crate::Result;

/// A stored workflow version.
#[derive(Debug, Clone, PartialEq)]
pub struct Workflow {
    /// The workflow.
    pub workflow_id: String,
    /// Its version.
    pub version: i32,
    /// The DAG JSON as stored (jsonb: key order is not kept).
    pub dag: serde_json::Value,
    /// When it was first stored.
    pub created_at: DateTime<Utc>,
}

/// The row [`get`] reads into a [`Workflow`].
#[derive(sqlx::FromRow)]
struct WorkflowRow {
    workflow_id: String,
    version: i32,
    dag: serde_json::Value,
    created_at: DateTime<Utc>,
}

impl From<WorkflowRow> for Workflow {
    fn from(row: WorkflowRow) -> Workflow {
        Workflow {
            workflow_id: row.workflow_id,
            version: row.version,
            dag: row.dag,
            created_at: row.created_at,
        }
    }
}

/// What [`put`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The version was new and is now stored.
    Created,
    /// The same DAG was already stored under this version: nothing changed.
    Unchanged,
    /// A different DAG is stored under this version: nothing changed.
    Conflict,
}

/// Stores a DAG under `(workflow_id, version)` unless one is there. An existing version is
/// compared as jsonb (semantic equality: key order and white space do not count).
///
/// # Errors
/// [`crate::Error::Database`] when a statement fails.
pub async fn put(
    conn: &mut PgConnection,
    workflow_id: &str,
    version: i32,
    dag: &serde_json::Value,
    now: DateTime<Utc>,
) -> Result<PutOutcome> {
    let inserted = sqlx::query(
        "insert into workflows (workflow_id, version, dag, created_at) values ($1, $2, $3, $4) \
         on conflict (workflow_id, version) do nothing",
    )
    .bind(workflow_id)
    .bind(version)
    .bind(sqlx::types::Json(dag))
    .bind(now)
    .execute(&mut *conn)
    .await?;
    if inserted.rows_affected() == 1 {
        return Ok(PutOutcome::Created);
    }
    let same: bool = sqlx::query_scalar(
        "select dag = $3::jsonb from workflows where workflow_id = $1 and version = $2",
    )
    .bind(workflow_id)
    .bind(version)
    .bind(sqlx::types::Json(dag))
    .fetch_one(&mut *conn)
    .await?;
    Ok(if same {
        PutOutcome::Unchanged
    } else {
        PutOutcome::Conflict
    })
}

/// One workflow version.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn get(
    conn: &mut PgConnection,
    workflow_id: &str,
    version: i32,
) -> Result<Option<Workflow>> {
    let row: Option<WorkflowRow> = sqlx::query_as(
        "select workflow_id, version, dag, created_at from workflows \
         where workflow_id = $1 and version = $2",
    )
    .bind(workflow_id)
    .bind(version)
    .fetch_optional(conn)
    .await?;
    Ok(row.map(Workflow::from))
}

/// How many workflow versions are stored (for tests and operators).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn count(conn: &mut PgConnection) -> Result<i64> {
    Ok(sqlx::query_scalar("select count(*) from workflows")
        .fetch_one(conn)
        .await?)
}

/// Whether `(workflow_id, version)` is stored.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn exists(conn: &mut PgConnection, workflow_id: &str, version: i32) -> Result<bool> {
    Ok(sqlx::query_scalar(
        "select exists (select from workflows where workflow_id = $1 and version = $2)",
    )
    .bind(workflow_id)
    .bind(version)
    .fetch_one(conn)
    .await?)
}

/// The newest stored versions of `workflow_id` (at most `limit`, newest first): what a
/// refusal of an unknown version names.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn versions(conn: &mut PgConnection, workflow_id: &str, limit: i64) -> Result<Vec<i32>> {
    Ok(sqlx::query_scalar(
        "select version from workflows where workflow_id = $1 order by version desc limit $2",
    )
    .bind(workflow_id)
    .bind(limit)
    .fetch_all(conn)
    .await?)
}

/// One workflow in a list: how many versions are stored, the newest, and how many schedules
/// run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The workflow.
    pub workflow_id: String,
    /// Stored versions.
    pub versions: i64,
    /// The newest version.
    pub latest_version: i32,
    /// When the newest version was stored.
    pub latest_created_at: DateTime<Utc>,
    /// Schedules of any version of it.
    pub schedules: i64,
}

/// The row [`list`] reads into a [`Listed`].
#[derive(sqlx::FromRow)]
struct ListedRow {
    workflow_id: String,
    versions: i64,
    latest_version: i32,
    latest_created_at: DateTime<Utc>,
    schedules: i64,
}

impl From<ListedRow> for Listed {
    fn from(row: ListedRow) -> Listed {
        Listed {
            workflow_id: row.workflow_id,
            versions: row.versions,
            latest_version: row.latest_version,
            latest_created_at: row.latest_created_at,
            schedules: row.schedules,
        }
    }
}

/// Workflows in id order after `after`, whose id contains `contains` (ignoring case) when
/// given, at most `limit`.
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn list(
    conn: &mut PgConnection,
    contains: Option<&str>,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<Listed>> {
    let rows: Vec<ListedRow> = sqlx::query_as(
        "select w.workflow_id, count(*) as versions, max(w.version) as latest_version, \
           (array_agg(w.created_at order by w.version desc))[1] as latest_created_at, \
           (select count(*) from schedules s where s.workflow_id = w.workflow_id) as schedules \
         from workflows w \
         where ($1::text is null or w.workflow_id ilike $1 escape '\\') \
           and ($2::text is null or w.workflow_id > $2) \
         group by w.workflow_id order by w.workflow_id limit $3",
    )
    .bind(contains.map(crate::schedules::contains_pattern))
    .bind(after)
    .bind(limit)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(Listed::from).collect())
}

/// The newest stored versions of `workflow_id` with when each was stored and how many
/// schedules run it (at most `limit`, newest first).
///
/// # Errors
/// [`crate::Error::Database`] when the query fails.
pub async fn version_list(
    conn: &mut PgConnection,
    workflow_id: &str,
    limit: i64,
) -> Result<Vec<(i32, DateTime<Utc>, i64)>> {
    Ok(sqlx::query_as(
        "select w.version, w.created_at, \
           (select count(*) from schedules s \
             where s.workflow_id = w.workflow_id and s.version = w.version) \
         from workflows w where w.workflow_id = $1 order by w.version desc limit $2",
    )
    .bind(workflow_id)
    .bind(limit)
    .fetch_all(conn)
    .await?)
}
