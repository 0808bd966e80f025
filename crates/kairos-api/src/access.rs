//! Every request's id and its one access-log line.
//!
//! A request keeps the `X-Request-Id` its caller sent (1 to 200 visible ASCII characters)
//! or gets a new one. The id is echoed on the response, written into every problem+json
//! body (`request_id`), and carried by every log line the request causes (the `request`
//! span, with the `trace_id` and `parent_id` of the caller's `traceparent` when it sent
//! one). When the response is done, one line says method, route, status, duration, id and
//! the caller's token name.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

/// The header that carries a request's id both ways.
pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Longest request id kept from a caller.
const MAX_ID_LEN: usize = 200;

tokio::task_local! {
    static CURRENT: Current;
}

/// What the layers inside learn about the request being served.
struct Current {
    id: String,
    route: Mutex<Option<String>>,
    caller: Mutex<Option<String>>,
}

/// The id of the request being served, if any.
pub(crate) fn request_id() -> Option<String> {
    CURRENT.try_with(|current| current.id.clone()).ok()
}

/// Notes the caller's token name (`sub` of a JWT) for the access line.
pub(crate) fn note_caller(name: &str) {
    let _ = CURRENT.try_with(|current| {
        if let Ok(mut caller) = current.caller.lock() {
            *caller = Some(name.to_string());
        }
    });
}

/// Who is making the request being served, as the history of changes records it: the
/// caller `require_role` let in (its token's name, its JWT's subject, or `anonymous` when
/// auth is off) and this request's id. A route with no role has no caller: `anonymous`.
#[derive(Debug, Clone)]
pub(crate) struct Caller(pub(crate) kairos_core::Actor);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Caller, Self::Rejection> {
        let name = parts
            .extensions
            .get::<kairos_auth::Principal>()
            .map_or_else(
                || "anonymous".to_string(),
                |principal| principal.name.clone(),
            );
        Ok(Caller(kairos_core::Actor::new(name, request_id())))
    }
}

/// A route layer: notes the route template (`/schedules/{id}`) the request matched.
pub(crate) async fn note_route(request: Request, next: Next) -> Response {
    if let Some(path) = request.extensions().get::<MatchedPath>() {
        let _ = CURRENT.try_with(|current| {
            if let Ok(mut route) = current.route.lock() {
                *route = Some(path.as_str().to_string());
            }
        });
    }
    next.run(request).await
}

/// The outermost layer: the id, the span, the echoed header and the access line.
pub(crate) async fn log_request(request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(&REQUEST_ID)
        .and_then(|value| value.to_str().ok())
        .filter(|text| is_acceptable(text))
        .map_or_else(new_id, str::to_string);
    let method = request.method().clone();
    // A caller's W3C `traceparent` puts the request in its trace: every line it causes
    // carries the trace id (a status report joins its run's trace this way over HTTP), and
    // the span names the caller's span as its parent (`parent_id`; an exported span is its
    // child).
    let caller_ids = request
        .headers()
        .get("traceparent")
        .and_then(|value| value.to_str().ok())
        .and_then(kairos_core::trace::ids_of);
    let trace_id = caller_ids.map_or("-", |(trace, _)| trace);
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        trace_id = %trace_id,
        parent_id = tracing::field::Empty,
    );
    if let Some((_, parent)) = caller_ids {
        span.record("parent_id", parent);
    }
    let current = Current {
        id: id.clone(),
        route: Mutex::new(None),
        caller: Mutex::new(None),
    };
    let started = Instant::now();
    let (mut response, current) = CURRENT
        .scope(current, async {
            let response = next.run(request).instrument(span.clone()).await;
            (response, taken())
        })
        .await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    let (route, caller) = current;
    tracing::info!(
        parent: &span,
        %method,
        route = route.as_deref().unwrap_or("(no route)"),
        status = response.status().as_u16(),
        duration_ms = started.elapsed().as_secs_f64() * 1000.0,
        caller = caller.as_deref().unwrap_or("-"),
        "request"
    );
    response
}

/// The route and caller noted while the request was served.
fn taken() -> (Option<String>, Option<String>) {
    CURRENT
        .try_with(|current| {
            let route = current.route.lock().ok().and_then(|mut r| r.take());
            let caller = current.caller.lock().ok().and_then(|mut c| c.take());
            (route, caller)
        })
        .unwrap_or_default()
}

/// A caller's id is kept when it is 1 to 200 visible ASCII characters.
fn is_acceptable(text: &str) -> bool {
    (1..=MAX_ID_LEN).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_graphic())
}

/// 32 hex digits, different for every request of every process.
fn new_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static KEYS: std::sync::OnceLock<(RandomState, RandomState)> = std::sync::OnceLock::new();
    let (high, low) = KEYS.get_or_init(|| (RandomState::new(), RandomState::new()));
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{:016x}{:016x}",
        high.hash_one((n, nanos, std::process::id())),
        low.hash_one((nanos, n))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_new_every_time_and_callers_ids_are_checked() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| new_id()).collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids.iter().all(|id| id.len() == 32 && is_acceptable(id)));
        assert!(is_acceptable("abc-123_X.y:z"));
        assert!(!is_acceptable(""));
        assert!(!is_acceptable("has space"));
        assert!(!is_acceptable(&"a".repeat(201)));
        assert!(!is_acceptable("caf\u{e9}"));
    }
}
