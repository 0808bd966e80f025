//! `GET /metrics`: the Prometheus text rendering of the recorder this process installed
//! (issue 5; built by `kairos_worker::metrics::recorder`, which also names every metric).

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
