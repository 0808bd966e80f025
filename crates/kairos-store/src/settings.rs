//! Server settings kairos depends on without being able to enforce them, read at start so an
//! operator is told by name. kairos updates every run several times (planned, published,
//! started, ended), so its tables and their partial indexes grow dead row versions at the
//! rate of the runs: without autovacuum they are never cleared (nor are the statistics the
//! planner needs taken again), and every claim, report and sweep walks more of them as the
//! hours pass.

use sqlx::PgPool;

use crate::Result;

/// A server setting that is not what kairos needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advice {
    /// The setting, as `SHOW` names it.
    pub setting: &'static str,
    /// Its value on the server.
    pub value: String,
    /// The value kairos needs.
    pub wanted: &'static str,
    /// What goes wrong without it.
    pub why: &'static str,
}

/// The settings that need changing on the server `pool` is connected to (none, when all
/// are as kairos needs them).
///
/// # Errors
/// [`crate::Error::Database`] when they cannot be read.
pub async fn advice(pool: &PgPool) -> Result<Vec<Advice>> {
    let (autovacuum, track_counts): (String, String) =
        sqlx::query_as("select current_setting('autovacuum'), current_setting('track_counts')")
            .fetch_one(pool)
            .await?;
    let mut advice = Vec::new();
    let why = "dead row versions of schedule_runs and runs_in_flight are never cleared and \
               their statistics never refreshed, so claims, status reports and sweeps slow \
               down as runs accumulate";
    if autovacuum != "on" {
        advice.push(Advice {
            setting: "autovacuum",
            value: autovacuum,
            wanted: "on",
            why,
        });
    }
    if track_counts != "on" {
        advice.push(Advice {
            setting: "track_counts",
            value: track_counts,
            wanted: "on (autovacuum needs it)",
            why,
        });
    }
    Ok(advice)
}
