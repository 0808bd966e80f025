//! The operator page's routes (`/ui`, rendered by `kairos_ui`). The shells and assets hold
//! no data and are open, since a browser navigation cannot carry a bearer token; the
//! fragments their script fetches are behind the reader role like the JSON reads, and show
//! the action buttons only to a caller the deployer role allows. The actions themselves are
//! the JSON API's routes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Redirect, Response};
use chrono::{DateTime, Utc};
use kairos_auth::{AuthMode, Role};
use kairos_store::overview::HourTotals;
use kairos_ui::{Page, Params, Viewer};

use crate::error::ApiError;
use crate::AppState;

/// Only this origin's script and style; never framed (clickjacking).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
    img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

fn with_headers(mut response: Response, content_type: &'static str) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

fn shell(state: &AppState, page: &Page) -> Response {
    let mode = match state.auth.mode() {
        AuthMode::None => "none",
        AuthMode::Tokens => "tokens",
        AuthMode::Jwt => "jwt",
    };
    let html = Html(kairos_ui::shell(page, mode)).into_response();
    with_headers(html, "text/html; charset=utf-8")
}

fn fragment(result: Result<String, kairos_registrar::Error>) -> Result<Response, ApiError> {
    let html = Html(result?).into_response();
    Ok(with_headers(html, "text/html; charset=utf-8"))
}

/// The caller as the fragments see it: may it deploy? (The route already required reader.)
fn viewer(state: &AppState, headers: &HeaderMap) -> Viewer {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .map(|value| value.to_str().unwrap_or("\u{0}"));
    Viewer {
        can_write: state.auth.authorize(authorization, Role::Deployer).is_ok(),
    }
}

/// `GET /ui`: the schedules list's shell.
pub(crate) async fn schedules_page(State(state): State<AppState>) -> Response {
    shell(&state, &Page::Schedules)
}

/// `GET /ui/schedules/{id}`: a schedule's shell. The id must be a schedule id (it becomes
/// the path the script fetches with the caller's token).
pub(crate) async fn schedule_page(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    kairos_core::validate_id("schedule_id", &id)
        .map_err(|err| kairos_registrar::Error::invalid("schedule_id", err.to_string()))?;
    Ok(shell(&state, &Page::Schedule(id)))
}

/// `GET /ui/runs`: the runs page's shell; `?key=` (the run page's older address) redirects
/// to `/ui/runs/{key}`.
pub(crate) async fn runs_page(
    State(state): State<AppState>,
    uri: Uri,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    match params.get("key") {
        Some(key) if run_key_ok(key) => {
            Redirect::permanent(&format!("/ui/runs/{key}")).into_response()
        }
        Some(_) => not_found(uri).await,
        None => shell(&state, &Page::Runs),
    }
}

/// A run key as `GET /runs/{key}` takes it (`^[A-Za-z0-9_-]{1,200}$`), so it needs no
/// escaping in a path or an attribute.
fn run_key_ok(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 200
        && key
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_'))
}

/// `GET /ui/runs/{key}`: a run's shell. A key no run can have gets the not-found page.
pub(crate) async fn run_page(
    State(state): State<AppState>,
    uri: Uri,
    Path(key): Path<String>,
) -> Response {
    if !run_key_ok(&key) {
        return not_found(uri).await;
    }
    shell(&state, &Page::Run(key))
}

/// Any other `/ui/...` path: the page's not-found page (HTML, 404).
pub(crate) async fn not_found(uri: Uri) -> Response {
    let page = Html(kairos_ui::not_found(uri.path())).into_response();
    let mut response = with_headers(page, "text/html; charset=utf-8");
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}

/// `GET /ui/workflows/{id}`: a workflow's shell. The id must be a workflow id (it becomes
/// the path the script fetches with the caller's token).
pub(crate) async fn workflow_page(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    kairos_core::validate_id("workflow_id", &id)
        .map_err(|err| kairos_registrar::Error::invalid("workflow_id", err.to_string()))?;
    Ok(shell(&state, &Page::Workflow(id)))
}

/// `GET /ui/fragments/workflows/{id}?version=`: the versions and the version's DAG as SVG.
pub(crate) async fn workflow_fragment(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let viewer = viewer(&state, &headers);
    fragment(kairos_ui::workflow(&state.registrar, &id, Params::new(params), viewer).await)
}

/// `GET /ui/assets/app.js`.
pub(crate) async fn script() -> Response {
    with_headers(
        kairos_ui::SCRIPT.into_response(),
        "text/javascript; charset=utf-8",
    )
}

/// `GET /ui/assets/app.css`.
pub(crate) async fn style() -> Response {
    with_headers(kairos_ui::STYLE.into_response(), "text/css; charset=utf-8")
}

/// `GET /ui/fragments/schedules?q=&workflow_id=&user_id=&paused=&cursor=` (`q`, `workflow_id`
/// and `user_id` match substrings).
pub(crate) async fn schedules_fragment(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let viewer = viewer(&state, &headers);
    let (day, day_at) = match last_day(&state).await {
        Ok(day) => day,
        Err(err) => return fragment(Err(err)),
    };
    fragment(
        kairos_ui::schedules(
            &state.registrar,
            Params::new(params),
            viewer,
            &day,
            day_at,
            LAST_DAY_MAX_AGE.as_secs(),
        )
        .await,
    )
}

/// How long the overview's last-day totals are reused: the list refreshes every 5 s, and on
/// a busy deployment the totals read millions of runs.
const LAST_DAY_MAX_AGE: Duration = Duration::from_secs(60);

/// The last day's totals across all schedules, the "now" they were read at, when they were
/// read, and the database they were read from (the key: one process may serve several).
type CachedDay = (String, Instant, Arc<Vec<HourTotals>>, DateTime<Utc>);

/// One entry; a process serves one database, so a second key only replaces the first.
static LAST_DAY: tokio::sync::Mutex<Option<CachedDay>> = tokio::sync::Mutex::const_new(None);

/// The overview's last-day totals, read at most once per [`LAST_DAY_MAX_AGE`] (callers
/// meanwhile wait on the lock instead of reading them again).
async fn last_day(
    state: &AppState,
) -> Result<(Arc<Vec<HourTotals>>, DateTime<Utc>), kairos_registrar::Error> {
    let options = state.registrar.pool().connect_options();
    let key = format!(
        "{}:{}/{}",
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or_default()
    );
    let mut cached = LAST_DAY.lock().await;
    if let Some((at_key, read, day, now)) = cached.as_ref() {
        if *at_key == key && read.elapsed() < LAST_DAY_MAX_AGE {
            return Ok((Arc::clone(day), *now));
        }
    }
    let (day, now) = state.registrar.last_day().await?;
    let day = Arc::new(day);
    *cached = Some((key, Instant::now(), Arc::clone(&day), now));
    Ok((day, now))
}

/// `GET /ui/fragments/schedules/{id}`.
pub(crate) async fn schedule_fragment(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let viewer = viewer(&state, &headers);
    fragment(kairos_ui::schedule(&state.registrar, &id, Params::new(params), viewer).await)
}

/// `GET /ui/fragments/schedules/{id}/backfill?from=&to=`: the ticks a backfill would create.
pub(crate) async fn backfill_fragment(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let viewer = viewer(&state, &headers);
    let params = Params::new(params);
    fragment(kairos_ui::backfill_plan(&state.registrar, &id, params, viewer).await)
}

/// `GET /ui/fragments/runs?view=&status=&schedule_id=&workflow_id=`.
pub(crate) async fn runs_fragment(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let viewer = viewer(&state, &headers);
    fragment(kairos_ui::runs(&state.registrar, Params::new(params), viewer).await)
}

/// `GET /ui/fragments/runs/{key}`: a run's page, with the launch message of its published
/// attempt.
pub(crate) async fn run_fragment(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(key): Path<String>,
) -> Result<Response, ApiError> {
    let viewer = viewer(&state, &headers);
    let subjects = &state.status_subjects;
    let launch = |run: &kairos_registrar::Run, workflow: &kairos_registrar::WorkflowView| {
        launch_text(run, workflow, subjects)
    };
    fragment(kairos_ui::run(&state.registrar, &key, viewer, Some(&launch)).await)
}

/// The launch message of `run`'s current attempt as published, built as the dispatcher
/// builds it (`kairos_worker`'s `messages::message`) with the subject its executor reports
/// on: its JSON (pretty-printed, fields in the order sent) and its `Nats-Msg-Id`.
fn launch_text(
    run: &kairos_registrar::Run,
    workflow: &kairos_registrar::WorkflowView,
    subjects: &kairos_launcher::status::StatusSubjects,
) -> (String, String) {
    use kairos_launcher::LaunchMessage;
    let message = LaunchMessage {
        idempotency_key: run.idempotency_key.clone(),
        schedule_id: run.schedule_id.clone(),
        workflow_id: run.workflow_id.clone(),
        version: i64::from(run.version),
        user_id: run.user_id.clone(),
        scheduled_for: LaunchMessage::timestamp(run.run_at),
        fire_at: LaunchMessage::timestamp(run.fire_at),
        source: run.source.into(),
        attempt: u32::try_from(run.attempt).unwrap_or(1),
        region: run.launch_region.clone(),
        dag: std::sync::Arc::new(workflow.dag.clone()),
    };
    // Invariant: every field serializes (as `LaunchMessage::encode` relies on).
    let status_subject = subjects.of(&message.idempotency_key);
    let json = serde_json::to_string_pretty(&message.reporting_on(&status_subject))
        .expect("launch messages always serialize");
    (json, message.msg_id())
}
