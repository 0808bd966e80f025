//! `GET /openapi.json`: the API's OpenAPI 3.1 document, `schemas/openapi.json` as built in.
//! It is self-contained (every `$ref` points inside it), so a client generator needs only
//! this one answer; tests hold it to the router, the statuses the server answers and the
//! fields each body accepts.

use axum::http::header;
use axum::response::IntoResponse;

/// The document, as in `schemas/openapi.json`.
pub const OPENAPI_JSON: &str = include_str!("../../../schemas/openapi.json");

/// `GET /openapi.json`.
pub(crate) async fn document() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI_JSON)
}
