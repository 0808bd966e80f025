//! The HTTP API of kairos (docs/design.md §5): registrar, workflow store and health routes on
//! axum. The only crate that serves HTTP: it maps requests to the registrar and the run
//! intake, and their answers to status codes and problem documents.
//!
//! [`app`] builds the router from [`routes`], the single list of (method, path, role) that
//! `schemas/openapi.json` is tested against. Each route requires a role ([`kairos_auth`]);
//! health routes, `GET /openapi.json` and `GET /metrics` are open (the metrics carry no
//! ids, only counts), and so are the operator page's shells and assets (`/ui`, no data; see
//! the `ui` module).

mod access;
mod body;
mod body_timeout;
mod calendars;
mod dead_letters;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod guard;
mod health;
mod history;
pub mod metrics;
pub mod openapi;
mod run_launcher;
mod runs;
mod schedules;
mod serve;
mod strict;
mod ui;
mod wire;
mod workflows;

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, Method};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{self, MethodRouter};
use axum::Router;
use kairos_auth::{Authenticator, Role};
use kairos_launcher::status::StatusSubjects;
use kairos_launcher::NatsLink;
use kairos_registrar::Registrar;
use kairos_worker::intake::Intake;

pub use error::ApiError;
pub use guard::{AllowedHosts, InvalidHost};
pub use serve::{serve, ServeLimits};

/// What every handler shares. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AppState {
    /// Schedules and workflows.
    pub registrar: Registrar,
    /// Checks bearer tokens.
    pub auth: Arc<Authenticator>,
    /// Largest request body accepted (`http.max_body_bytes`).
    pub max_body_bytes: usize,
    /// The `Host` values this instance answers to, and so the origins writes may come from
    /// (`http.allowed_hosts`; see the `guard` module).
    pub allowed_hosts: AllowedHosts,
    /// Status reports and run-launcher starts (the worker's one run intake).
    pub intake: Intake,
    /// This instance's NATS connection, for `/readyz`; `None` when it runs no role that
    /// needs NATS.
    pub nats: Option<NatsLink>,
    /// Renders `GET /metrics` (a handle to the recorder this process installed, see
    /// `kairos_worker::metrics::recorder`); `None`: that route answers 503.
    pub metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    /// Where launch messages tell executors to report (`nats.subject_prefix`,
    /// `nats.status_partitions`): the run page shows the launch message as published.
    pub status_subjects: StatusSubjects,
}

/// One route: the router is built from these and the OpenAPI test reads them.
#[derive(Debug)]
pub struct Route {
    /// HTTP method.
    pub method: Method,
    /// axum path syntax (`/schedules/{id}`), the same as OpenAPI's.
    pub path: &'static str,
    /// The role required; `None` for open routes (health).
    pub role: Option<Role>,
    handler: MethodRouter<AppState>,
}

fn route(
    method: Method,
    path: &'static str,
    role: Option<Role>,
    handler: MethodRouter<AppState>,
) -> Route {
    Route {
        method,
        path,
        role,
        handler,
    }
}

/// Every route this crate serves.
pub fn routes() -> Vec<Route> {
    use routing::{delete, get, post, put};
    use Role::{Deployer, Executor, Reader};
    vec![
        route(
            Method::POST,
            "/schedules/upsert",
            Some(Deployer),
            post(schedules::upsert),
        ),
        route(
            Method::POST,
            "/schedules/pause",
            Some(Deployer),
            post(schedules::pause),
        ),
        route(
            Method::POST,
            "/schedules/preview",
            Some(Reader),
            post(schedules::preview),
        ),
        route(
            Method::GET,
            "/schedules",
            Some(Reader),
            get(schedules::list),
        ),
        route(
            Method::GET,
            "/schedules/{id}",
            Some(Reader),
            get(schedules::get),
        ),
        route(
            Method::DELETE,
            "/schedules/{id}",
            Some(Deployer),
            delete(schedules::delete),
        ),
        route(
            Method::GET,
            "/schedules/{id}/runs",
            Some(Reader),
            get(schedules::runs),
        ),
        route(
            Method::GET,
            "/schedules/{id}/history",
            Some(Reader),
            get(history::schedule),
        ),
        route(Method::GET, "/history", Some(Reader), get(history::list)),
        route(
            Method::POST,
            "/schedules/{id}/trigger",
            Some(Deployer),
            post(schedules::trigger::trigger),
        ),
        route(
            Method::POST,
            "/schedules/{id}/backfill",
            Some(Deployer),
            post(schedules::backfill::backfill),
        ),
        route(
            Method::POST,
            "/schedules/{id}/skips",
            Some(Deployer),
            post(schedules::skips::create),
        ),
        route(
            Method::GET,
            "/schedules/{id}/skips",
            Some(Reader),
            get(schedules::skips::list),
        ),
        route(
            Method::DELETE,
            "/schedules/{id}/skips/{run_at}",
            Some(Deployer),
            delete(schedules::skips::delete),
        ),
        route(
            Method::PUT,
            "/calendars/{name}",
            Some(Deployer),
            put(calendars::put),
        ),
        route(
            Method::GET,
            "/calendars/{name}",
            Some(Reader),
            get(calendars::get),
        ),
        route(
            Method::DELETE,
            "/calendars/{name}",
            Some(Deployer),
            delete(calendars::delete),
        ),
        route(
            Method::GET,
            "/calendars",
            Some(Reader),
            get(calendars::list),
        ),
        route(
            Method::PUT,
            "/workflows/{id}/versions/{version}",
            Some(Deployer),
            put(workflows::put),
        ),
        route(
            Method::GET,
            "/workflows/{id}/versions/{version}",
            Some(Reader),
            get(workflows::get),
        ),
        route(
            Method::GET,
            "/workflows",
            Some(Reader),
            get(workflows::list),
        ),
        route(
            Method::GET,
            "/workflows/{id}/versions",
            Some(Reader),
            get(workflows::versions),
        ),
        route(
            Method::POST,
            "/runs/{key}/status",
            Some(Executor),
            post(runs::status::report),
        ),
        route(
            Method::POST,
            "/runs/status",
            Some(Executor),
            post(runs::status::report_many),
        ),
        route(Method::GET, "/runs/{key}", Some(Reader), get(runs::get)),
        route(Method::GET, "/runs", Some(Reader), get(runs::list)),
        route(
            Method::POST,
            "/runs/{key}/retry",
            Some(Deployer),
            post(runs::retry),
        ),
        route(
            Method::POST,
            "/runs/{key}/cancel",
            Some(Deployer),
            post(runs::cancel),
        ),
        route(
            Method::GET,
            "/dead-letters",
            Some(Reader),
            get(dead_letters::dead_letters),
        ),
        route(
            Method::POST,
            "/run-launcher/start",
            Some(Executor),
            post(run_launcher::start),
        ),
        route(Method::GET, "/healthz", None, get(health::healthz)),
        route(Method::GET, "/openapi.json", None, get(openapi::document)),
        // The operator page (`kairos_ui`): open shells and assets, fragments for readers.
        route(Method::GET, "/ui", None, get(ui::schedules_page)),
        route(
            Method::GET,
            "/ui/schedules/{id}",
            None,
            get(ui::schedule_page),
        ),
        route(Method::GET, "/ui/runs", None, get(ui::runs_page)),
        route(Method::GET, "/ui/runs/{key}", None, get(ui::run_page)),
        route(
            Method::GET,
            "/ui/workflows/{id}",
            None,
            get(ui::workflow_page),
        ),
        route(
            Method::GET,
            "/ui/fragments/workflows/{id}",
            Some(Reader),
            get(ui::workflow_fragment),
        ),
        route(Method::GET, "/ui/assets/app.js", None, get(ui::script)),
        route(Method::GET, "/ui/assets/app.css", None, get(ui::style)),
        route(
            Method::GET,
            "/ui/fragments/schedules",
            Some(Reader),
            get(ui::schedules_fragment),
        ),
        route(
            Method::GET,
            "/ui/fragments/schedules/{id}",
            Some(Reader),
            get(ui::schedule_fragment),
        ),
        route(
            Method::GET,
            "/ui/fragments/schedules/{id}/backfill",
            Some(Reader),
            get(ui::backfill_fragment),
        ),
        route(
            Method::GET,
            "/ui/fragments/runs",
            Some(Reader),
            get(ui::runs_fragment),
        ),
        route(
            Method::GET,
            "/ui/fragments/runs/{key}",
            Some(Reader),
            get(ui::run_fragment),
        ),
        route(Method::GET, "/readyz", None, get(health::readyz)),
        route(Method::GET, "/metrics", None, get(metrics::render)),
    ]
}

/// The router: every route of [`routes`] behind its role check, the body limit, and
/// problem+json for every refusal: 404 for unknown paths, 405 for a known path with another
/// method, and any other plain-text 4xx/5xx (axum's extractor rejections) rewritten. In
/// front of routing, every request passes the `Host`, `Origin`, `Content-Length` and
/// `Content-Type` checks of the `guard` module.
pub fn app(state: AppState) -> Router {
    let guard = guard::Guard {
        hosts: state.allowed_hosts.clone(),
        max_body_bytes: state.max_body_bytes,
    };
    let mut router = Router::new();
    for route in routes() {
        let handler = match route.role {
            Some(role) => {
                let gate = Gate {
                    auth: state.auth.clone(),
                    role,
                };
                route
                    .handler
                    .route_layer(middleware::from_fn_with_state(gate, require_role))
            }
            None => route.handler,
        };
        let handler = handler.route_layer(middleware::from_fn(access::note_route));
        router = router.route(route.path, handler);
    }
    router
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .fallback(|uri: axum::http::Uri| async move {
            if uri.path() == "/ui" || uri.path().starts_with("/ui/") {
                ui::not_found(uri).await
            } else {
                ApiError::NoRoute.into_response()
            }
        })
        .layer(DefaultBodyLimit::max(state.max_body_bytes))
        .layer(middleware::from_fn_with_state(guard, guard::check))
        .layer(middleware::map_response(error::problem_json_refusals))
        .layer(middleware::from_fn(access::log_request))
        .with_state(state)
}

/// The role a route requires, with the authenticator that checks it.
#[derive(Debug, Clone)]
struct Gate {
    auth: Arc<Authenticator>,
    role: Role,
}

/// Refuses the request (401/403 problem) unless its bearer token allows the route's role.
/// Each refusal is logged (method, path, required role, the reason and, for 403, who the
/// caller is; never the token) and counted in [`metrics::AUTH_REFUSALS`].
async fn require_role(State(gate): State<Gate>, mut request: Request, next: Next) -> Response {
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|value| value.to_str().unwrap_or("\u{0}"));
    match gate.auth.authorize(authorization, gate.role) {
        Ok(principal) => {
            access::note_caller(&principal.name);
            // The handlers that write name the caller in the history of changes.
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Err(err) => {
            log_refusal(&request, gate.role, &err);
            ApiError::Auth(err).into_response()
        }
    }
}

fn log_refusal(request: &Request, required: Role, err: &kairos_auth::Error) {
    let (method, path) = (request.method(), request.uri().path());
    match err {
        kairos_auth::Error::Forbidden { principal, .. } => {
            metrics::auth_refused(true);
            tracing::warn!(%method, path, %required, caller = %principal, reason = %err,
                "request refused: forbidden");
        }
        _ if err.is_unauthenticated() => {
            metrics::auth_refused(false);
            tracing::warn!(%method, path, %required, reason = %err,
                "request refused: unauthenticated");
        }
        _ => {}
    }
}
