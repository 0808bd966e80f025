//! The checks every request passes before routing, so that a web page the
//! operator opens cannot use the API, even with `auth.mode = none`:
//!
//! - `Host` must be one this instance answers to ([`AllowedHosts`]), on every request,
//!   reads included: with DNS rebinding a hostile page's name points at 127.0.0.1 and the
//!   browser then lets the page read the answers too. A request without `Host` (in-process
//!   `oneshot` calls, HTTP/1.0 tools) is let through: browsers always send one.
//! - A write (any method but GET, HEAD, OPTIONS) carrying `Origin` must come from this
//!   instance itself: the origin's host and port must be the request's `Host` (or, without
//!   `Host`, an allowed host). Same-origin pages (the later `/ui`) pass; cross-site pages,
//!   sandboxed (`Origin: null`) ones included, are refused.
//! - A request with a body must say `Content-Type: application/json`: `text/plain` and form
//!   posts are the requests browsers send cross-site without asking first (415).
//! - A declared `Content-Length` over `http.max_body_bytes` is answered 413 at once instead
//!   of after waiting for a body that may never come.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::HttpBody;
use axum::extract::{Request, State};
use axum::http::uri::Authority;
use axum::http::{header, HeaderMap, Method, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use kairos_registrar::Problem;

use crate::error::ApiError;

/// The `Host` values (host and optional port) this instance answers to
/// (`http.allowed_hosts`). Host names compare case-insensitively; an entry without a port
/// matches every port, and a `Host` without a port matches an entry of that name (a
/// browser leaves the port out only for the scheme's default port, so this never lets a
/// page on another port in under a name that is not listed).
#[derive(Debug, Clone)]
pub struct AllowedHosts(Option<Arc<[Authority]>>);

/// An `http.allowed_hosts` entry that is not `host` or `host:port`.
#[derive(Debug, thiserror::Error)]
#[error("http.allowed_hosts entry {entry:?} is not host or host:port")]
pub struct InvalidHost {
    /// The entry as written.
    pub entry: String,
}

impl AllowedHosts {
    /// The defaults for a listener on `bind`: `bind` itself, `localhost:<port>` and
    /// `127.0.0.1:<port>` (and `[::1]:<port>`). A bind on every interface (`0.0.0.0`, `::`)
    /// is reached under names this instance cannot know, so it allows every `Host`; the
    /// Origin check still applies, and `auth.mode = none` is refused on such a bind.
    pub fn for_bind(bind: SocketAddr) -> AllowedHosts {
        if bind.ip().is_unspecified() {
            return AllowedHosts(None);
        }
        let port = bind.port();
        let hosts = [
            bind.to_string(),
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ];
        AllowedHosts::list(&hosts).expect("socket addresses are authorities")
    }

    /// Exactly `hosts` (`host` or `host:port` each), each once (case aside).
    ///
    /// # Errors
    /// [`InvalidHost`] naming the first entry that is not an authority without user info.
    pub fn list(hosts: &[String]) -> Result<AllowedHosts, InvalidHost> {
        let mut parsed: Vec<Authority> = hosts
            .iter()
            .map(|entry| {
                entry
                    .parse::<Authority>()
                    .ok()
                    .filter(|authority| !authority.as_str().contains('@'))
                    .ok_or_else(|| InvalidHost {
                        entry: entry.clone(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut seen = std::collections::HashSet::new();
        parsed.retain(|authority| seen.insert(authority.as_str().to_ascii_lowercase()));
        Ok(AllowedHosts(Some(parsed.into())))
    }

    fn allows(&self, authority: &Authority) -> bool {
        let Some(allowed) = &self.0 else {
            return true;
        };
        allowed.iter().any(|entry| {
            entry.host().eq_ignore_ascii_case(authority.host())
                && match (entry.port_u16(), authority.port_u16()) {
                    (Some(want), Some(got)) => want == got,
                    _ => true,
                }
        })
    }

    fn describe(&self) -> String {
        match &self.0 {
            None => "any host".to_string(),
            Some(allowed) => allowed
                .iter()
                .map(Authority::as_str)
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

/// What [`check`] needs.
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    pub hosts: AllowedHosts,
    pub max_body_bytes: usize,
}

/// Refuses the request (403, 413 or 415 problem+json) unless it passes every check of this
/// module; nothing behind it runs for a refused request.
pub(crate) async fn check(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    match refusal(&guard, &request) {
        Some(err) => err.into_response(),
        None => next.run(request).await,
    }
}

fn refusal(guard: &Guard, request: &Request) -> Option<ApiError> {
    let headers = request.headers();
    let host = match host(headers, request.uri()) {
        Ok(host) => host,
        Err(problem) => return Some(ApiError::Refused(problem)),
    };
    if let Some(host) = &host {
        if !guard.hosts.allows(host) {
            return Some(refused(
                "Host",
                format!(
                    "{} is not one of http.allowed_hosts ({})",
                    quoted(host.as_str()),
                    guard.hosts.describe()
                ),
            ));
        }
    }
    let write = !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if write {
        if let Some(problem) = cross_origin(guard, headers, host.as_ref()) {
            return Some(ApiError::Refused(problem));
        }
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > guard.max_body_bytes as u64) {
        return Some(ApiError::TooLarge(guard.max_body_bytes));
    }
    if let Some(name) = request
        .uri()
        .query()
        .and_then(crate::strict::repeated_query_parameter)
    {
        let rule = "is given more than once (each query parameter at most once)";
        return Some(ApiError::BadRequest(vec![Problem::new(name, rule)]));
    }
    let has_body = request.body().size_hint().exact() != Some(0);
    if has_body && !is_json(headers) {
        let received = headers.get(header::CONTENT_TYPE).map(|kind| {
            String::from_utf8_lossy(kind.as_bytes())
                .chars()
                .take(100)
                .collect()
        });
        return Some(ApiError::UnsupportedMediaType(received));
    }
    None
}

/// The request's `Host` (or the authority of an absolute-form target), `None` when it
/// names none.
fn host(headers: &HeaderMap, uri: &Uri) -> Result<Option<Authority>, Problem> {
    if let Some(value) = headers.get(header::HOST) {
        let authority = value
            .to_str()
            .ok()
            .and_then(|text| text.parse::<Authority>().ok())
            .filter(|authority| !authority.as_str().contains('@'));
        return match authority {
            Some(authority) => Ok(Some(authority)),
            None => Err(Problem::new("Host", "must be host or host:port")),
        };
    }
    Ok(uri.authority().cloned())
}

/// Why a write's `Origin` is not this instance, if it is not.
fn cross_origin(guard: &Guard, headers: &HeaderMap, host: Option<&Authority>) -> Option<Problem> {
    let value = headers.get(header::ORIGIN)?;
    let text = String::from_utf8_lossy(value.as_bytes());
    let origin = text
        .parse::<Uri>()
        .ok()
        .filter(|uri| matches!(uri.scheme_str(), Some("http" | "https")));
    let Some(authority) = origin.as_ref().and_then(Uri::authority) else {
        return Some(Problem::new(
            "Origin",
            format!(
                "{} is not this instance: writes are accepted only from the same origin",
                quoted(&text)
            ),
        ));
    };
    let scheme = origin.as_ref().and_then(Uri::scheme_str).unwrap_or("http");
    let same = host.is_none_or(|host| same_authority(authority, host, scheme));
    if same && guard.hosts.allows(authority) {
        return None;
    }
    Some(Problem::new(
        "Origin",
        format!(
            "{} is not this instance: writes are accepted only from the same origin",
            quoted(&text)
        ),
    ))
}

/// Whether the origin's host and port are the `Host`'s (a missing port is the scheme's
/// default, as browsers write it).
fn same_authority(origin: &Authority, host: &Authority, scheme: &str) -> bool {
    let default = if scheme == "https" { 443 } else { 80 };
    origin.host().eq_ignore_ascii_case(host.host())
        && origin.port_u16().unwrap_or(default) == host.port_u16().unwrap_or(default)
}

/// `application/json` or `application/<anything>+json`, parameters (`charset`) allowed.
fn is_json(headers: &HeaderMap) -> bool {
    let Some(kind) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
    else {
        return false;
    };
    let essence = kind
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn refused(field: &str, rule: String) -> ApiError {
    ApiError::Refused(Problem::new(field, rule))
}

/// A header value for an error message: quoted, at most 100 characters.
fn quoted(text: &str) -> String {
    let short: String = text.chars().take(100).collect();
    format!("{short:?}")
}
