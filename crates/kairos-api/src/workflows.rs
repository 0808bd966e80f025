//! Handlers under `/workflows`: the list of workflows, a workflow's versions, one version,
//! and the deploy of a version with its schedule sync.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use kairos_registrar::{rfc3339, Problem, WorkflowInput};

use crate::access::Caller;
use crate::body::{self, Fields};
use crate::error::bad_request;
use crate::error::ApiError;
use crate::wire::{
    schedule_list, DeployedBody, UpsertAnswer, VersionBody, VersionsBody, WorkflowBody,
    WorkflowPageBody, WorkflowSummaryBody,
};
use crate::AppState;

/// `PUT /workflows/{id}/versions/{v}[?dry_run=true]`: `{dag, schedules?}`. 201 when the
/// version is new, 200 when the same DAG was already stored (the schedule sync runs either
/// way); a dry-run answers 200 with what it would do and stores nothing.
pub(crate) async fn put(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Path((workflow_id, version)): Path<(String, String)>,
    Query(params): Query<HashMap<String, String>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let version = parse_version(&version)?;
    let dry_run = crate::schedules::dry_run(params)?;
    let input = read_deploy(
        &workflow_id,
        version,
        body::json(body, state.max_body_bytes)?,
    )?;
    if dry_run {
        let dry = state.registrar.put_workflow_dry_run(&input).await?;
        return Ok((StatusCode::OK, Json(crate::wire::dry_run_body(dry))).into_response());
    }
    let deployed = state
        .registrar
        .acting_as(actor)
        .put_workflow(&input)
        .await?;
    let location = format!("/workflows/{workflow_id}/versions/{version}");
    let answer = DeployedBody {
        workflow_id,
        version,
        created: deployed.created,
        schedules: deployed.schedules.iter().map(UpsertAnswer::of).collect(),
        removed: deployed.removed,
    };
    Ok(crate::wire::written(
        deployed.created,
        location,
        Json(answer),
    ))
}

/// `GET /workflows/{id}/versions/{v}`: `{workflow_id, version, dag, created_at}`.
pub(crate) async fn get(
    State(state): State<AppState>,
    Path((workflow_id, version)): Path<(String, String)>,
) -> Result<Json<WorkflowBody>, ApiError> {
    let version = parse_version(&version)?;
    let stored = state.registrar.get_workflow(&workflow_id, version).await?;
    Ok(Json(WorkflowBody {
        workflow_id: stored.workflow_id,
        version: stored.version,
        dag: stored.dag,
        created_at: rfc3339(stored.created_at),
    }))
}

fn parse_version(text: &str) -> Result<i64, ApiError> {
    text.parse().map_err(|_| {
        ApiError::BadRequest(vec![Problem::new(
            "version",
            format!("{text:?} is not an integer version"),
        )])
    })
}

/// Reads a deploy body `{dag, schedules?}` for workflow `workflow_id` version `version`.
pub(crate) fn read_deploy(
    workflow_id: &str,
    version: i64,
    body: serde_json::Value,
) -> Result<WorkflowInput, ApiError> {
    let mut fields = Fields::new(body, "");
    let dag = fields.value("dag", true);
    let items = fields.array("schedules", false);
    let schedules = items.map(|items| schedule_list(items, workflow_id, version, &mut fields));
    bad_request(fields.finish())?;
    Ok(WorkflowInput {
        workflow_id: workflow_id.to_string(),
        version,
        dag: dag.unwrap_or_default(),
        schedules,
    })
}

/// `GET /workflows?q=&cursor=&limit=` → `{workflows, next_cursor}` in id order (`q`: a
/// case-insensitive substring of the workflow id).
pub(crate) async fn list(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<WorkflowPageBody>, ApiError> {
    let mut query = body::Query::new(params);
    let q = query.text("q");
    let cursor = query.text("cursor");
    let limit = query.integer("limit", 100);
    query.finish()?;
    let page = state
        .registrar
        .list_workflows(q.as_deref(), cursor.as_deref(), limit)
        .await?;
    let workflows: Vec<WorkflowSummaryBody> = page
        .workflows
        .into_iter()
        .map(WorkflowSummaryBody::of)
        .collect();
    Ok(Json(WorkflowPageBody {
        workflows,
        next_cursor: page.next_cursor,
    }))
}

/// `GET /workflows/{id}/versions` → `{workflow_id, versions}`, newest first, each with when
/// it was stored and how many schedules run it; 404 when none is stored.
pub(crate) async fn versions(
    State(state): State<AppState>,
    Path(workflow_id): Path<String>,
) -> Result<Json<VersionsBody>, ApiError> {
    let versions: Vec<VersionBody> = state
        .registrar
        .workflow_version_list(&workflow_id)
        .await?
        .into_iter()
        .map(VersionBody::of)
        .collect();
    Ok(Json(VersionsBody {
        workflow_id,
        versions,
    }))
}
