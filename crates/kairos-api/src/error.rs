//! [`ApiError`] and its one mapping to status codes and `application/problem+json`
//! (RFC 9457). Internal failures are logged here with their whole chain and answered with
//! "an internal error occurred".

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use kairos_registrar::Problem;
use serde::Serialize;

/// Everything a handler can answer instead of success.
#[derive(Debug)]
pub enum ApiError {
    /// A registrar refusal (invalid input, not found, conflict) or failure.
    Registrar(kairos_registrar::Error),
    /// The request itself is malformed (not JSON, wrong JSON type, unknown field).
    BadRequest(Vec<Problem>),
    /// The body is larger than `http.max_body_bytes`.
    TooLarge(usize),
    /// No or bad credentials, or a role that may not call the route.
    Auth(kairos_auth::Error),
    /// No route with this path.
    NoRoute,
    /// A dependency (PostgreSQL) does not answer.
    Unavailable(String),
}

impl From<kairos_registrar::Error> for ApiError {
    fn from(err: kairos_registrar::Error) -> ApiError {
        ApiError::Registrar(err)
    }
}

/// The problem document.
#[derive(Debug, Serialize)]
struct ProblemBody {
    #[serde(rename = "type")]
    kind: &'static str,
    title: &'static str,
    status: u16,
    detail: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<FieldError>,
}

/// One offending field.
#[derive(Debug, Serialize)]
struct FieldError {
    field: String,
    rule: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        use kairos_registrar::Error as R;
        let (status, kind, title, detail, problems) = match self {
            ApiError::Registrar(R::Invalid(problems)) | ApiError::BadRequest(problems) => (
                StatusCode::BAD_REQUEST,
                "urn:kairos:problem:invalid-request",
                "invalid request",
                summary(&problems),
                problems,
            ),
            ApiError::Registrar(R::NotFound { what }) => (
                StatusCode::NOT_FOUND,
                "urn:kairos:problem:not-found",
                "not found",
                format!("{what} not found"),
                vec![],
            ),
            ApiError::Registrar(R::Conflict { detail }) => (
                StatusCode::CONFLICT,
                "urn:kairos:problem:conflict",
                "conflict",
                detail,
                vec![],
            ),
            ApiError::TooLarge(limit) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "urn:kairos:problem:body-too-large",
                "request body too large",
                format!("the request body exceeds http.max_body_bytes ({limit} bytes)"),
                vec![],
            ),
            ApiError::Auth(err) if err.is_unauthenticated() => {
                let mut response = problem(
                    StatusCode::UNAUTHORIZED,
                    "urn:kairos:problem:unauthenticated",
                    "unauthenticated",
                    err.to_string(),
                    vec![],
                );
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                return response;
            }
            ApiError::Auth(err @ kairos_auth::Error::Forbidden { .. }) => (
                StatusCode::FORBIDDEN,
                "urn:kairos:problem:forbidden",
                "forbidden",
                err.to_string(),
                vec![],
            ),
            ApiError::NoRoute => (
                StatusCode::NOT_FOUND,
                "urn:kairos:problem:not-found",
                "not found",
                "no such route".into(),
                vec![],
            ),
            ApiError::Unavailable(what) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "urn:kairos:problem:unavailable",
                "unavailable",
                what,
                vec![],
            ),
            ApiError::Registrar(err) => return internal(&err),
            ApiError::Auth(err) => return internal(&err),
        };
        problem(status, kind, title, detail, problems)
    }
}

fn summary(problems: &[Problem]) -> String {
    match problems {
        [] => "the request is invalid".to_string(),
        [one] => one.to_string(),
        [first, rest @ ..] => format!("{first} (and {} more problem(s), see errors)", rest.len()),
    }
}

fn problem(
    status: StatusCode,
    kind: &'static str,
    title: &'static str,
    detail: String,
    problems: Vec<Problem>,
) -> Response {
    let body = ProblemBody {
        kind,
        title,
        status: status.as_u16(),
        detail,
        errors: problems
            .into_iter()
            .map(|p| FieldError {
                field: p.field,
                rule: p.rule,
            })
            .collect(),
    };
    let json = serde_json::to_vec(&body).expect("problem documents serialize");
    let mut response = (status, json).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}

/// Logs the whole error chain and answers 500 without detail.
fn internal(err: &(dyn std::error::Error + 'static)) -> Response {
    let mut chain = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        chain.push_str(": ");
        chain.push_str(&cause.to_string());
        source = cause.source();
    }
    tracing::error!(error = %chain, "request failed");
    problem(
        StatusCode::INTERNAL_SERVER_ERROR,
        "urn:kairos:problem:internal",
        "internal error",
        "an internal error occurred".to_string(),
        vec![],
    )
}
