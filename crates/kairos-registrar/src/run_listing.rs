//! Runs across schedules ([`Registrar::list_runs`], `GET /runs`): by status or phase,
//! schedule, workflow, source and a range of ticks, newest first, paged by cursor. The
//! phases `late` and `dead_letter` list by when runs were so marked (as `GET /runs?late=true`
//! and `GET /dead-letters` do).

use chrono::{DateTime, Utc};
use kairos_core::{RunSource, RunStatus};
use kairos_store::run_search::{self, RunSearch};
use kairos_store::schedules as store;

use crate::attempts::DeadLetterQuery;
use crate::checks::{check_filter_ids, check_limit, not_found};
use crate::cursor::{self, RunPage};
use crate::error::{Error, Result};
use crate::overview::run_status;
use crate::Registrar;

/// A phase of runs, across statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `ENQUEUED`, `STARTED`, `RETRYING` or `CANCELLING`.
    InFlight,
    /// `FAILED` or `TIMED_OUT`.
    Failed,
    /// Dead-lettered: the last attempt failed (by when, newest first).
    DeadLetter,
    /// Not `SUCCESS` by the deadline (by when marked, newest first).
    Late,
}

/// The names [`Phase::parse`] takes.
const PHASES: &str = "in_flight, failed, dead_letter, late";

impl Phase {
    /// The phase named `text`.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming `phase` and the names it takes.
    pub fn parse(text: &str) -> Result<Phase> {
        match text {
            "in_flight" => Ok(Phase::InFlight),
            "failed" => Ok(Phase::Failed),
            "dead_letter" => Ok(Phase::DeadLetter),
            "late" => Ok(Phase::Late),
            other => Err(Error::invalid(
                "phase",
                format!("{other:?} is not a phase: use one of {PHASES}"),
            )),
        }
    }
}

/// What [`Registrar::list_runs`] lists.
#[derive(Debug, Clone, Default)]
pub struct RunQuery {
    /// Only runs in this status (a status name).
    pub status: Option<String>,
    /// Only runs in this phase.
    pub phase: Option<Phase>,
    /// Only this schedule's runs (404 when it neither exists nor has runs).
    pub schedule_id: Option<String>,
    /// Only this workflow's runs.
    pub workflow_id: Option<String>,
    /// Only runs created this way (a source name).
    pub source: Option<String>,
    /// Only ticks at or after this.
    pub from: Option<DateTime<Utc>>,
    /// Only ticks at or before this.
    pub to: Option<DateTime<Utc>>,
    /// The previous page's `next_cursor`.
    pub cursor: Option<String>,
    /// Page size, 1 to [`crate::LIST_LIMIT_MAX`].
    pub limit: i64,
}

impl Registrar {
    /// A page of runs across schedules matching `query`, newest first.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the field for a bad filter, or a status and a phase given
    /// together; [`Error::NotFound`] for a schedule that neither exists nor has runs;
    /// [`Error::Store`].
    pub async fn list_runs(&self, query: &RunQuery) -> Result<RunPage> {
        check_limit(query.limit)?;
        check_filter_ids([
            ("schedule_id", &query.schedule_id),
            ("workflow_id", &query.workflow_id),
        ])?;
        let page = match query.phase {
            Some(phase @ (Phase::Late | Phase::DeadLetter)) => self.marked(phase, query).await?,
            _ => self.searched(query).await?,
        };
        if let (Some(id), true, None) = (&query.schedule_id, page.runs.is_empty(), &query.cursor) {
            if store::get(&self.pool, id).await?.is_none() {
                return Err(not_found(id));
            }
        }
        Ok(page)
    }

    /// Late or dead-lettered runs: only the schedule and workflow filters apply.
    async fn marked(&self, phase: Phase, query: &RunQuery) -> Result<RunPage> {
        let unused = [
            ("status", query.status.is_some()),
            ("source", query.source.is_some()),
            ("from", query.from.is_some()),
            ("to", query.to.is_some()),
        ];
        if let Some((field, _)) = unused.iter().find(|(_, given)| *given) {
            return Err(Error::invalid(
                *field,
                "does not apply to the phases late and dead_letter (they list by when runs \
                 were marked; filter by schedule_id or workflow_id)",
            ));
        }
        let marked = DeadLetterQuery {
            schedule_id: query.schedule_id.clone(),
            workflow_id: query.workflow_id.clone(),
            cursor: query.cursor.clone(),
            limit: query.limit,
        };
        match phase {
            Phase::Late => self.late_runs(&marked).await,
            _ => self.dead_letters(&marked).await,
        }
    }

    /// Runs by status, phase (in flight, failed), source and tick range, newest tick first.
    async fn searched(&self, query: &RunQuery) -> Result<RunPage> {
        let statuses = match (query.phase, &query.status) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid(
                    "status",
                    "give a status or a phase, not both",
                ))
            }
            (Some(Phase::InFlight), None) => RunStatus::ALL
                .into_iter()
                .filter(|status| status.holds_schedule())
                .collect(),
            (Some(_), None) => vec![RunStatus::Failed, RunStatus::TimedOut],
            (None, Some(status)) => vec![run_status(status)?],
            (None, None) => Vec::new(),
        };
        let source = match &query.source {
            Some(text) => Some(text.parse::<RunSource>().map_err(|err| {
                Error::invalid(
                    "source",
                    format!(
                        "{:?} is not a source: use one of {}",
                        err.value, err.allowed
                    ),
                )
            })?),
            None => None,
        };
        if let (Some(from), Some(to)) = (query.from, query.to) {
            if to < from {
                return Err(Error::invalid("to", "is before from"));
            }
        }
        let before = query.cursor.as_deref().map(cursor::parse).transpose()?;
        let search = RunSearch {
            statuses,
            schedule_id: query.schedule_id.clone(),
            workflow_id: query.workflow_id.clone(),
            source,
            from: query.from,
            to: query.to,
            before,
            limit: query.limit + 1,
        };
        let runs = run_search::search(&self.pool, &search).await?;
        Ok(RunPage::of(runs, query.limit, |run| Some(run.run_at)))
    }
}
