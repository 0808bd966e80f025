//! Workflow store and deploy sync: `PUT /workflows/{id}/versions/{v}` stores an immutable
//! DAG and, with `schedules`, makes them the workflow's full schedule set in one transaction
//! (create, update, delete), so a deploy is all or nothing.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use kairos_core::{ChangeKind, FieldChange, FieldValue, Schedule, Subject};
use kairos_store::runs;
use kairos_store::schedules as store;
use kairos_store::workflows::{self, PutOutcome};

use kairos_store::Tx;

use crate::apply::{self, Plan, PlanError};
use crate::checks::{check_limit, check_search, plan_error};
use crate::error::{Error, Problem, Result};
use crate::input::{self, Checked, DagLimit, ScheduleInput, Settings};
use crate::{dag, rules, Registrar};

/// Reason written on the unpublished runs of a schedule a deploy removed.
const REMOVED: &str = "schedule deleted: not in the workflow's deployed set";

/// How many versions [`Registrar::workflow_versions`] answers at most (the newest).
pub const WORKFLOW_VERSIONS_MAX: i64 = 100;

/// The body of a workflow deploy.
#[derive(Debug, Clone)]
pub struct WorkflowInput {
    /// From the path.
    pub workflow_id: String,
    /// From the path.
    pub version: i64,
    /// The DAG JSON (`schemas/dag.schema.json`).
    pub dag: serde_json::Value,
    /// When present, the workflow's complete schedule set after this deploy. Each entry's
    /// `workflow_id` and `version` must be this workflow's.
    pub schedules: Option<Vec<ScheduleInput>>,
}

/// What a deploy did.
#[derive(Debug, Clone)]
pub struct Deployed {
    /// True when this version was stored now (false: the same DAG was already there).
    pub created: bool,
    /// The synced schedules as stored, in request order (empty without `schedules`).
    pub schedules: Vec<Schedule>,
    /// Ids of this workflow's schedules the deploy deleted.
    pub removed: Vec<String>,
}

/// A stored workflow version.
#[derive(Debug, Clone)]
pub struct WorkflowView {
    /// The workflow.
    pub workflow_id: String,
    /// Its version.
    pub version: i32,
    /// The DAG as stored.
    pub dag: serde_json::Value,
    /// When it was stored.
    pub created_at: DateTime<Utc>,
}

/// One workflow of [`Registrar::list_workflows`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowSummary {
    /// The workflow.
    pub workflow_id: String,
    /// How many versions are stored.
    pub versions: i64,
    /// The newest version.
    pub latest_version: i32,
    /// When the newest version was stored.
    pub latest_created_at: DateTime<Utc>,
    /// Schedules of any version of it.
    pub schedules: i64,
}

/// A page of [`Registrar::list_workflows`].
#[derive(Debug, Clone)]
pub struct WorkflowPage {
    /// The workflows, in id order.
    pub workflows: Vec<WorkflowSummary>,
    /// Pass as the cursor for the next page; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// One version of [`Registrar::workflow_version_list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionSummary {
    /// The version.
    pub version: i32,
    /// When it was stored.
    pub created_at: DateTime<Utc>,
    /// Schedules that run this version.
    pub schedules: i64,
}

impl Registrar {
    /// Stores a workflow version (same DAG again: no-op) and, with `schedules`, syncs the
    /// workflow's schedule set. Nothing is stored unless everything is valid.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming every bad field (`dag`, `schedules[3].cron_expr`, ...);
    /// [`Error::Conflict`] when this version holds a different DAG, a schedule id belongs to
    /// another workflow, or a concurrent write got in the way; [`Error::Store`].
    pub async fn put_workflow(&self, input: &WorkflowInput) -> Result<Deployed> {
        let mut tx = Tx::begin(&self.pool).await?;
        let deployed = self.put_workflow_in(&mut tx, input).await?;
        tx.commit().await?;
        Ok(deployed)
    }

    /// The writes of [`Registrar::put_workflow`] in the caller's transaction (a dry-run
    /// drops it).
    pub(crate) async fn put_workflow_in(
        &self,
        tx: &mut Tx,
        input: &WorkflowInput,
    ) -> Result<Deployed> {
        let (version, checked) = check_workflow(&self.settings, input)?;
        let now = self.now(tx).await?;
        let created = match workflows::put(tx, &input.workflow_id, version, &input.dag, now).await?
        {
            PutOutcome::Created => true,
            PutOutcome::Unchanged => false,
            PutOutcome::Conflict => {
                return Err(Error::Conflict {
                    detail: format!(
                        "workflow {:?} version {version} is already stored with a different dag; \
                         versions are immutable: deploy a new version",
                        input.workflow_id
                    ),
                })
            }
        };
        if created {
            let subject = Subject::workflow(&input.workflow_id, version);
            let fields = vec![FieldChange::new("version", FieldValue::Null, version)];
            let change = self.change(subject, ChangeKind::Create, fields);
            crate::history::record(tx, &[change], now).await?;
        }
        let Some(mut checked) = checked else {
            return Ok(Deployed {
                created,
                schedules: Vec::new(),
                removed: Vec::new(),
            });
        };
        let ids: Vec<String> = checked.iter().map(|c| c.schedule_id.clone()).collect();
        let existing = store::for_sync(&mut **tx, &input.workflow_id, &ids).await?;
        resolve_all(tx, &mut checked).await?;
        let wanted: HashSet<&str> = ids.iter().map(String::as_str).collect();
        let stale: Vec<String> = existing
            .iter()
            .filter(|s| {
                s.workflow_id == input.workflow_id && !wanted.contains(s.schedule_id.as_str())
            })
            .map(|s| s.schedule_id.clone())
            .collect();
        crate::chains::check(tx, &checked, &stale, |index| {
            Some(format!("schedules[{index}]"))
        })
        .await?;
        let plans = self.plan_sync(&input.workflow_id, &checked, &existing, now)?;
        let schedules = apply::apply(tx, plans, now).await?;
        let removed = store::delete_many(&mut **tx, &stale).await?;
        runs::cancel_unpublished(&mut **tx, &removed, REMOVED, now).await?;
        let before: HashMap<&str, &Schedule> = existing
            .iter()
            .map(|s| (s.schedule_id.as_str(), s))
            .collect();
        let synced = schedules
            .iter()
            .map(|s| (before.get(s.schedule_id.as_str()).copied(), Some(s)));
        let gone = removed
            .iter()
            .map(|id| (before.get(id.as_str()).copied(), None));
        let changes: Vec<_> = synced
            .chain(gone)
            .filter_map(|(old, new)| self.schedule_change(ChangeKind::DeploySync, old, new))
            .collect();
        crate::history::record(tx, &changes, now).await?;
        Ok(Deployed {
            created,
            schedules,
            removed,
        })
    }

    /// One workflow version.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad id or version; [`Error::NotFound`]; [`Error::Store`].
    pub async fn get_workflow(&self, workflow_id: &str, version: i64) -> Result<WorkflowView> {
        let version = check_key(workflow_id, version).map_err(Error::Invalid)?;
        let mut conn = Tx::begin(&self.pool).await?;
        let stored = workflows::get(&mut conn, workflow_id, version)
            .await?
            .ok_or_else(|| Error::NotFound {
                what: format!("workflow {workflow_id:?} version {version}"),
            })?;
        Ok(WorkflowView {
            workflow_id: stored.workflow_id,
            version: stored.version,
            dag: stored.dag,
            created_at: stored.created_at,
        })
    }

    /// The stored versions of a workflow, newest first (at most [`WORKFLOW_VERSIONS_MAX`]).
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad id; [`Error::NotFound`] when no version is stored;
    /// [`Error::Store`].
    pub async fn workflow_versions(&self, workflow_id: &str) -> Result<Vec<i32>> {
        kairos_core::validate_id("workflow_id", workflow_id)
            .map_err(|err| Error::invalid("workflow_id", err.to_string()))?;
        let mut conn = Tx::begin(&self.pool).await?;
        let versions = workflows::versions(&mut conn, workflow_id, WORKFLOW_VERSIONS_MAX).await?;
        if versions.is_empty() {
            return Err(Error::NotFound {
                what: format!("workflow {workflow_id:?}"),
            });
        }
        Ok(versions)
    }

    /// A page of workflows in id order: those whose id contains `q` (ignoring case) when
    /// given, after `cursor` (the last id of the previous page); `limit` 1..=1000.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad `q`, cursor or limit; [`Error::Store`].
    pub async fn list_workflows(
        &self,
        q: Option<&str>,
        cursor: Option<&str>,
        limit: i64,
    ) -> Result<WorkflowPage> {
        check_limit(limit)?;
        if let Some(cursor) = cursor {
            kairos_core::validate_id("cursor", cursor)
                .map_err(|err| Error::invalid("cursor", err.to_string()))?;
        }
        if let Some(q) = q {
            check_search("q", q)?;
        }
        let mut conn = Tx::begin(&self.pool).await?;
        let rows = workflows::list(&mut conn, q, cursor, limit).await?;
        let full = i64::try_from(rows.len()).unwrap_or(i64::MAX) == limit;
        let next_cursor = full
            .then(|| rows.last().map(|w| w.workflow_id.clone()))
            .flatten();
        let workflows = rows
            .into_iter()
            .map(|w| WorkflowSummary {
                workflow_id: w.workflow_id,
                versions: w.versions,
                latest_version: w.latest_version,
                latest_created_at: w.latest_created_at,
                schedules: w.schedules,
            })
            .collect();
        Ok(WorkflowPage {
            workflows,
            next_cursor,
        })
    }

    /// The stored versions of a workflow with when each was stored and how many schedules
    /// run it, newest first (at most [`WORKFLOW_VERSIONS_MAX`]).
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad id; [`Error::NotFound`] when no version is stored;
    /// [`Error::Store`].
    pub async fn workflow_version_list(&self, workflow_id: &str) -> Result<Vec<VersionSummary>> {
        kairos_core::validate_id("workflow_id", workflow_id)
            .map_err(|err| Error::invalid("workflow_id", err.to_string()))?;
        let mut conn = Tx::begin(&self.pool).await?;
        let rows = workflows::version_list(&mut conn, workflow_id, WORKFLOW_VERSIONS_MAX).await?;
        if rows.is_empty() {
            return Err(Error::NotFound {
                what: format!("workflow {workflow_id:?}"),
            });
        }
        Ok(rows
            .into_iter()
            .map(|(version, created_at, schedules)| VersionSummary {
                version,
                created_at,
                schedules,
            })
            .collect())
    }

    /// Plans every schedule of the set against what is stored; all problems at once.
    fn plan_sync(
        &self,
        workflow_id: &str,
        checked: &[Checked],
        existing: &[Schedule],
        now: DateTime<Utc>,
    ) -> Result<Vec<Plan>> {
        let by_id: HashMap<&str, &Schedule> = existing
            .iter()
            .map(|s| (s.schedule_id.as_str(), s))
            .collect();
        let mut problems = Vec::new();
        let mut plans = Vec::new();
        for (index, one) in checked.iter().enumerate() {
            let stored = by_id.get(one.schedule_id.as_str()).copied();
            if let Some(other) = stored.filter(|s| s.workflow_id != workflow_id) {
                return Err(Error::Conflict {
                    detail: format!(
                        "schedules[{index}].schedule_id {:?} belongs to workflow {:?}",
                        one.schedule_id, other.workflow_id
                    ),
                });
            }
            match apply::plan(one, stored, now, &self.settings) {
                Ok(plan) => plans.push(plan),
                Err(PlanError::Field(problem)) => {
                    problems.push(problem.within(&format!("schedules[{index}]")))
                }
                Err(err) => return Err(plan_error(err, &one.schedule_id)),
            }
        }
        if problems.is_empty() {
            Ok(plans)
        } else {
            Err(Error::Invalid(problems))
        }
    }
}

/// Checks everything that needs no database: path, DAG, every schedule, duplicate ids.
pub(crate) fn check_workflow(
    settings: &Settings,
    input: &WorkflowInput,
) -> Result<(i32, Option<Vec<Checked>>)> {
    let mut problems = Vec::new();
    let version = check_key(&input.workflow_id, input.version)
        .map_err(|p| problems.extend(p))
        .ok();
    if dag::contains_nul(&input.dag) {
        problems.push(Problem::new("dag", dag::NUL_RULE));
    } else if let Some(problem) = too_large(&input.dag, &settings.dag_limit) {
        problems.push(problem);
    } else if let Err(err) = dag::validate_dag(&input.dag) {
        problems.push(Problem::new("dag", err.to_string()));
    }
    let checked = input.schedules.as_ref().map(|list| {
        let mut seen = HashMap::new();
        let mut checked = Vec::new();
        let mut specs = input::Specs::default();
        for (index, schedule) in list.iter().enumerate() {
            let prefix = format!("schedules[{index}]");
            problems.extend(
                belongs(input, schedule)
                    .into_iter()
                    .map(|p| p.within(&prefix)),
            );
            match input::check_sharing(schedule, settings, &mut specs) {
                Ok(ok) => {
                    if let Some(first) = seen.insert(ok.schedule_id.clone(), index) {
                        problems.push(Problem::new(
                            format!("{prefix}.schedule_id"),
                            format!("{:?} repeats schedules[{first}]", ok.schedule_id),
                        ));
                    }
                    checked.push(ok);
                }
                Err(found) => problems.extend(found.into_iter().map(|p| p.within(&prefix))),
            }
        }
        checked
    });
    match version {
        Some(version) if problems.is_empty() => Ok((version, checked)),
        _ => Err(Error::Invalid(problems)),
    }
}

/// Resolves the calendars every schedule of a deploy names (one statement for all).
async fn resolve_all(tx: &mut Tx, checked: &mut [Checked]) -> Result<()> {
    let names: Vec<String> = checked
        .iter()
        .flat_map(|c| c.rules.stored.exclude_calendars.iter().cloned())
        .collect();
    let calendars = rules::load(tx, &names).await?;
    let mut problems = Vec::new();
    for (index, one) in checked.iter_mut().enumerate() {
        if let Err(found) = one.resolve(&calendars) {
            let prefix = format!("schedules[{index}]");
            problems.extend(found.into_iter().map(|p| p.within(&prefix)));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::Invalid(problems))
    }
}

/// Every launch message carries the DAG; one larger than the NATS server's `max_payload`
/// allows would be stored and then fail every launch, so it is refused at deploy.
fn too_large(dag: &serde_json::Value, limit: &DagLimit) -> Option<Problem> {
    let size = dag::json_len(dag);
    let limit_bytes = limit.get();
    (size > limit_bytes).then(|| {
        Problem::new(
            "dag",
            format!(
                "is {size} bytes as JSON; launch messages must fit the NATS server's \
                 max_payload ({} bytes), leaving at most {limit_bytes} bytes for the DAG",
                limit.max_payload()
            ),
        )
    })
}

/// A deployed schedule must launch the workflow and version being deployed.
fn belongs(input: &WorkflowInput, schedule: &ScheduleInput) -> Vec<Problem> {
    let mut problems = Vec::new();
    if schedule.workflow_id != input.workflow_id {
        problems.push(Problem::new(
            "workflow_id",
            format!(
                "{:?} is not the workflow being deployed ({:?})",
                schedule.workflow_id, input.workflow_id
            ),
        ));
    }
    if schedule.version != input.version {
        problems.push(Problem::new(
            "version",
            format!(
                "{} is not the version being deployed ({})",
                schedule.version, input.version
            ),
        ));
    }
    problems
}

fn check_key(workflow_id: &str, version: i64) -> std::result::Result<i32, Vec<Problem>> {
    let mut problems = Vec::new();
    if let Err(err) = kairos_core::validate_id("workflow_id", workflow_id) {
        problems.push(Problem::new("workflow_id", err.to_string()));
    }
    let version = i32::try_from(version).ok().filter(|v| *v >= 0);
    if version.is_none() {
        problems.push(Problem::new(
            "version",
            "must be an integer between 0 and 2147483647",
        ));
    }
    match version {
        Some(version) if problems.is_empty() => Ok(version),
        _ => Err(problems),
    }
}

/// How many stored versions a refusal of an unknown one lists.
const VERSIONS_NAMED: i64 = 5;

/// Refuses a schedule whose workflow version is not stored: every run of it would fail to
/// launch ("version not found"), so the write is refused instead, naming `version` when the
/// workflow has other versions and `workflow_id` when it has none.
pub(crate) async fn check_stored(tx: &mut Tx, workflow_id: &str, version: i32) -> Result<()> {
    if workflows::exists(tx, workflow_id, version).await? {
        return Ok(());
    }
    let stored = workflows::versions(tx, workflow_id, VERSIONS_NAMED).await?;
    let deploy = format!("deploy it first with PUT /workflows/{workflow_id}/versions/{version}");
    Err(if stored.is_empty() {
        Error::invalid(
            "workflow_id",
            format!("workflow {workflow_id:?} has no stored version; {deploy}"),
        )
    } else {
        let listed: Vec<String> = stored.iter().map(i32::to_string).collect();
        Error::invalid(
            "version",
            format!(
                "workflow {workflow_id:?} has no version {version} (newest stored: {}); {deploy}",
                listed.join(", ")
            ),
        )
    })
}
