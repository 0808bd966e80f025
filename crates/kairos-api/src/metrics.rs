//! `GET /metrics`: the Prometheus text rendering of the recorder this process installed
//! (built by `kairos_worker::metrics::recorder`, whose catalog names the worker's metrics),
//! and the HTTP layer's own counters (auth refusals, connections refused at the limit).

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::AppState;

/// The content type of the Prometheus text exposition format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET /metrics`: every metric in the Prometheus text format; 503 when this process
/// records none.
pub(crate) async fn render(State(state): State<AppState>) -> Result<Response, ApiError> {
    let Some(handle) = &state.metrics else {
        return Err(ApiError::Unavailable(
            "this instance records no metrics".into(),
        ));
    };
    Ok(([(header::CONTENT_TYPE, TEXT_FORMAT)], handle.render()).into_response())
}

/// Counter: requests refused for their credentials, by `outcome`: `unauthenticated` (401:
/// no, malformed or unknown token, or an invalid JWT) or `forbidden` (403: the caller's role
/// may not call the route).
pub const AUTH_REFUSALS: &str = "kairos_http_auth_refusals_total";

/// Counter: connections closed as soon as accepted because `http.max_connections` were open
/// and none of them was idle (all in a request).
pub const CONNECTIONS_REFUSED: &str = "kairos_http_connections_refused_total";

/// Counter: idle connections (waiting for a request's headers) closed because
/// `http.max_connections` were open and a new connection took the slot.
pub const IDLE_CONNECTIONS_EVICTED: &str = "kairos_http_idle_connections_evicted_total";

/// The `outcome` labels of [`AUTH_REFUSALS`].
const AUTH_OUTCOMES: [&str; 2] = ["unauthenticated", "forbidden"];

/// Registers the HTTP metrics' help text with the current recorder and exports them at 0
/// (call once after installing it, like `kairos_worker::metrics::describe`).
pub fn describe() {
    metrics::describe_counter!(
        AUTH_REFUSALS,
        "Requests refused for their credentials (401 unauthenticated, 403 forbidden)"
    );
    metrics::describe_counter!(
        CONNECTIONS_REFUSED,
        "Connections closed at accept because http.max_connections were open, none idle"
    );
    metrics::describe_counter!(
        IDLE_CONNECTIONS_EVICTED,
        "Idle connections closed to make room for a new one at http.max_connections"
    );
    for outcome in AUTH_OUTCOMES {
        metrics::counter!(AUTH_REFUSALS, "outcome" => outcome).increment(0);
    }
    metrics::counter!(CONNECTIONS_REFUSED).increment(0);
    metrics::counter!(IDLE_CONNECTIONS_EVICTED).increment(0);
}

/// One request refused 401 (`unauthenticated`) or 403 (`forbidden`).
pub(crate) fn auth_refused(forbidden: bool) {
    let outcome = AUTH_OUTCOMES[usize::from(forbidden)];
    metrics::counter!(AUTH_REFUSALS, "outcome" => outcome).increment(1);
}

/// One connection closed at accept.
pub(crate) fn connection_refused() {
    metrics::counter!(CONNECTIONS_REFUSED).increment(1);
}

/// One idle connection closed for a new one.
pub(crate) fn idle_connection_evicted() {
    metrics::counter!(IDLE_CONNECTIONS_EVICTED).increment(1);
}
