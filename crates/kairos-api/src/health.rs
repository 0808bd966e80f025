//! `/healthz` (the process answers) and `/readyz` (PostgreSQL answers within a deadline).

use std::time::Duration;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::AppState;

/// How long `/readyz` waits for PostgreSQL.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// Liveness: always 200 while the process serves requests.
pub(crate) async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// Readiness: 200 when PostgreSQL answers `select 1` in time, else 503.
pub(crate) async fn readyz(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let ping = kairos_store::ping(state.registrar.pool());
    match tokio::time::timeout(READY_TIMEOUT, ping).await {
        Ok(Ok(())) => Ok(Json(
            json!({ "status": "ready", "checks": { "postgres": "ok" } }),
        )),
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "readiness: postgres failed");
            Err(ApiError::Unavailable("postgres does not answer".into()))
        }
        Err(_) => Err(ApiError::Unavailable(
            "postgres did not answer within 2 s".into(),
        )),
    }
}
