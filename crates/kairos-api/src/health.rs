//! `/healthz` (the process answers) and `/readyz` (PostgreSQL and, when this instance runs a
//! role that needs NATS, NATS JetStream answer within a deadline).

use std::time::Duration;

use axum::extract::State;
use axum::Json;
use serde::Serialize;

use crate::error::ApiError;
use crate::AppState;

/// How long `/readyz` waits for each dependency.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// `/healthz`: `{status: "ok"}`.
#[derive(Debug, Serialize)]
pub(crate) struct Alive {
    status: &'static str,
}

/// `/readyz`: `{status: "ready", checks: {postgres, nats}}`.
#[derive(Debug, Serialize)]
pub(crate) struct Ready {
    status: &'static str,
    checks: Checks,
}

/// What `/readyz` checked: `ok`, or for NATS `not configured` on an instance that needs none.
#[derive(Debug, Serialize)]
pub(crate) struct Checks {
    postgres: &'static str,
    nats: &'static str,
}

/// Liveness: always 200 while the process serves requests.
pub(crate) async fn healthz() -> Json<Alive> {
    Json(Alive { status: "ok" })
}

/// Readiness: 200 when PostgreSQL answers `select 1` and JetStream answers for the launch
/// stream in time (NATS is reported `not configured` on an instance that needs none),
/// else 503 naming the dependency.
pub(crate) async fn readyz(State(state): State<AppState>) -> Result<Json<Ready>, ApiError> {
    let ping = kairos_store::ping(state.registrar.pool());
    match tokio::time::timeout(READY_TIMEOUT, ping).await {
        Ok(Ok(true)) => {}
        Ok(Ok(false)) => {
            return Err(ApiError::Unavailable(
                "postgres (database.url) is a read-only standby: no primary to write to".into(),
            ))
        }
        Ok(Err(err)) => {
            tracing::debug!(error = %err, "readiness: postgres failed");
            return Err(ApiError::Unavailable(
                "postgres (database.url) does not answer: no primary to write to".into(),
            ));
        }
        Err(_) => {
            return Err(ApiError::Unavailable(
                "postgres (database.url) did not answer within 2 s".into(),
            ))
        }
    }
    let nats = match &state.nats {
        None => "not configured",
        Some(link) => match link.get() {
            None => {
                let reason = link.not_ready_reason().unwrap_or_default();
                return Err(ApiError::Unavailable(format!(
                    "nats is not connected yet ({reason}); runs are planned and wait in \
                     PostgreSQL until it is"
                )));
            }
            Some(launcher) => match launcher.ready(READY_TIMEOUT).await {
                Ok(()) => "ok",
                Err(err) => {
                    tracing::warn!(error = %err, "readiness: nats failed");
                    return Err(ApiError::Unavailable(
                        "nats jetstream does not answer".into(),
                    ));
                }
            },
        },
    };
    Ok(Json(Ready {
        status: "ready",
        checks: Checks {
            postgres: "ok",
            nats,
        },
    }))
}
