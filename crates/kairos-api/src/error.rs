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
    /// The path exists but not with this method (the router adds the `Allow` header).
    MethodNotAllowed,
    /// A dependency (PostgreSQL) does not answer.
    Unavailable(String),
    /// The body did not arrive within `http.body_read_timeout_ms` (its value, in ms).
    BodyTimeout(u128),
    /// A body that is not `application/json` (the `Content-Type` received, if any).
    UnsupportedMediaType(Option<String>),
    /// A request refused before routing: a `Host` that is not in `http.allowed_hosts`, or a
    /// write from another origin. The field (`Host`, `Origin`) and the rule.
    Refused(Problem),
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
    /// The request's id (`X-Request-Id`), to find its log lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<String>,
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
            ApiError::MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                "urn:kairos:problem:method-not-allowed",
                "method not allowed",
                "this route does not accept the method (see the Allow header)".into(),
                vec![],
            ),
            ApiError::Unavailable(what) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "urn:kairos:problem:unavailable",
                "unavailable",
                what,
                vec![],
            ),
            ApiError::BodyTimeout(ms) => {
                let mut response = problem(
                    StatusCode::REQUEST_TIMEOUT,
                    "urn:kairos:problem:body-timeout",
                    "request body timeout",
                    format!(
                        "the request body was not received within http.body_read_timeout_ms \
                         ({ms} ms)"
                    ),
                    vec![],
                );
                // The rest of the body may still come; the connection cannot be reused.
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
                return response;
            }
            ApiError::UnsupportedMediaType(received) => {
                let received = received.map_or("none".to_string(), |kind| format!("{kind:?}"));
                let rule = format!("must be application/json, not {received}");
                (
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "urn:kairos:problem:unsupported-media-type",
                    "unsupported media type",
                    format!("Content-Type {rule}"),
                    vec![Problem::new("Content-Type", rule)],
                )
            }
            ApiError::Refused(refusal) => (
                StatusCode::FORBIDDEN,
                "urn:kairos:problem:forbidden",
                "forbidden",
                refusal.to_string(),
                vec![refusal],
            ),
            ApiError::Registrar(err) => return internal(&err),
            ApiError::Auth(err) => return internal(&err),
        };
        problem(status, kind, title, detail, problems)
    }
}

/// The largest plain refusal body [`problem_json_refusals`] reads; axum's own rejection
/// texts are one line.
const PLAIN_REFUSAL_LIMIT: usize = 64 * 1024;

/// Turns a 4xx/5xx answer that is not already problem+json into one, keeping the status
/// and headers (`Allow`, `WWW-Authenticate`), with `title` from the status and the original
/// text as `detail`. Refusals made outside our handlers (axum's extractor rejections, such
/// as a path segment that is not UTF-8 once percent-decoded) would otherwise go out as
/// text/plain; this layer makes "every refusal is problem+json" hold without listing them.
pub(crate) async fn problem_json_refusals(response: Response) -> Response {
    let status = response.status();
    // A problem already, or the operator page's own not-found page (HTML).
    let already_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|kind| {
            kind.as_bytes().starts_with(b"application/problem+json")
                || kind.as_bytes().starts_with(b"text/html")
        });
    if !(status.is_client_error() || status.is_server_error()) || already_problem {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, PLAIN_REFUSAL_LIMIT).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_string(),
        Err(_) => String::new(),
    };
    let title = status.canonical_reason().unwrap_or("error");
    let detail = if text.is_empty() {
        title.to_string()
    } else {
        text
    };
    let answer = problem(status, "about:blank", title, detail, vec![]);
    let (answer_parts, answer_body) = answer.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    for (name, value) in &answer_parts.headers {
        parts.headers.insert(name, value.clone());
    }
    Response::from_parts(parts, answer_body)
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
        request_id: crate::access::request_id(),
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
    let chain = kairos_core::error_chain(err);
    tracing::error!(error = %chain, "request failed");
    problem(
        StatusCode::INTERNAL_SERVER_ERROR,
        "urn:kairos:problem:internal",
        "internal error",
        "an internal error occurred".to_string(),
        vec![],
    )
}

/// Problems found while reading a request are a 400 before anything else runs.
pub(crate) fn bad_request(problems: Vec<Problem>) -> Result<(), ApiError> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ApiError::BadRequest(problems))
    }
}

/// A store failure of the intake: logged by the error mapping, answered 500.
pub(crate) fn intake_failed(err: kairos_worker::intake::Error) -> ApiError {
    match err {
        kairos_worker::intake::Error::Store(err) => {
            ApiError::Registrar(kairos_registrar::Error::Store(err))
        }
        other => ApiError::Unavailable(other.to_string()),
    }
}
