//! `GET /dead-letters`: runs whose last attempt failed, newest first.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::Json;
use kairos_registrar::DeadLetterQuery;

use crate::body;
use crate::error::ApiError;
use crate::wire::RunPageBody;
use crate::AppState;

/// `GET /dead-letters?schedule_id=&workflow_id=&limit=&cursor=` → `{runs, next_cursor}`.
pub(crate) async fn dead_letters(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<RunPageBody>, ApiError> {
    let mut query = body::Query::new(params);
    let filter = DeadLetterQuery {
        schedule_id: query.text("schedule_id"),
        workflow_id: query.text("workflow_id"),
        cursor: query.text("cursor"),
        limit: query.integer("limit", 100),
    };
    query.finish()?;
    Ok(Json(RunPageBody::of(
        state.registrar.dead_letters(&filter).await?,
    )))
}
