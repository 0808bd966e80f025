//! Runs (`/ui/runs`): the runs that have fired, newest first, filtered by status, schedule
//! and workflow; the ticks planned but not yet due, apart; the runs in flight and for how
//! long; the dead letters. Also the run table the schedule page shares, and (with `key`)
//! one run's page.

use chrono::{DateTime, Utc};
use kairos_core::RunStatus;
use kairos_registrar::{
    in_flight_for, run_status, DeadLetterQuery, Registrar, Run, RunFilter, LIST_LIMIT_MAX,
};
use maud::{html, Markup};

use crate::actions::{cancel_form, role_note, run_actions};
use crate::links::run_href;
use crate::params::Params;
use crate::text::words;
use crate::time::{is_utc, rfc3339, span, utc, zoned};
use crate::Viewer;

/// Runs per page.
const LIMIT: i64 = 100;

/// The views of the runs page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum View {
    /// Runs whose fire time has come, newest first.
    Fired,
    /// Runs planned ahead (their fire time is still to come), soonest first.
    Upcoming,
    InFlight,
    DeadLetters,
}

/// The runs fragment for the query `params` (`view` = `recent` | `upcoming` | `in_flight`
/// | `dead_letters`, `status`, `schedule_id`, `workflow_id`), or with `key` alone the page
/// of that run without its launch message (the page itself, `/ui/runs/{key}`, loads
/// [`crate::run()`] with one).
///
/// # Errors
/// `Invalid` for a bad parameter; `NotFound` for an unknown run; a store error.
pub async fn runs(
    registrar: &Registrar,
    params: Params,
    viewer: Viewer,
) -> Result<String, kairos_registrar::Error> {
    let mut params = params;
    if let Some(key) = params.text("key") {
        params.finish()?;
        return crate::run::run(registrar, &key, viewer, None).await;
    }
    let view = match params.text("view").as_deref() {
        None | Some("recent") => View::Fired,
        Some("upcoming") => View::Upcoming,
        Some("in_flight") => View::InFlight,
        Some("dead_letters") => View::DeadLetters,
        Some(other) => {
            params.problem(kairos_registrar::Problem::new(
                "view",
                format!("{other:?} is not recent, upcoming, in_flight or dead_letters"),
            ));
            View::Fired
        }
    };
    let status_text = params.text("status");
    let filter = RunFilter {
        status: None,
        schedule_id: params.text("schedule_id"),
        workflow_id: params.text("workflow_id"),
        limit: LIMIT,
    };
    params.finish()?;
    let filter = RunFilter {
        status: status_text.as_deref().map(run_status).transpose()?,
        ..filter
    };
    let mut scanned_all = true;
    let (runs, now) = match view {
        View::Fired | View::Upcoming => {
            // The newest rows hold the ticks planned ahead (about the planner's horizon):
            // read more than a page and split them at "now".
            let wide = RunFilter {
                limit: LIST_LIMIT_MAX,
                ..filter.clone()
            };
            let (rows, now) = registrar.recent_runs(&wide).await?;
            scanned_all = i64::try_from(rows.len()).unwrap_or(i64::MAX) < LIST_LIMIT_MAX;
            (split_at_now(rows, now, view == View::Upcoming), now)
        }
        View::InFlight => registrar.in_flight(&filter).await?,
        View::DeadLetters => {
            let page = registrar
                .dead_letters(&DeadLetterQuery {
                    schedule_id: filter.schedule_id.clone(),
                    workflow_id: filter.workflow_id.clone(),
                    cursor: None,
                    limit: LIMIT,
                })
                .await?;
            (page.runs, registrar.clock().await?)
        }
    };
    let markup = html! {
        h1 { "Runs" }
        (role_note(viewer))
        (view_tabs(view, &filter, status_text.as_deref()))
        (filters(view, status_text.as_deref(), &filter))
        p.muted #view-note {
            @match view {
                View::Fired => { "Runs whose fire time has come, newest tick first (at most " (LIMIT) "). Ticks planned ahead are under Upcoming. Times in UTC." }
                View::Upcoming => { "Ticks planned ahead whose fire time is still to come, soonest first (at most " (LIMIT) "). Times in UTC." }
                View::InFlight => { "Runs an executor still owes an answer for (ENQUEUED, STARTED) or waiting to retry, the longest in flight first. Times in UTC." }
                View::DeadLetters => { "Runs whose last attempt failed for good, newest first. Times in UTC." }
            }
        }
        @if !scanned_all && i64::try_from(runs.len()).unwrap_or(0) < LIMIT {
            p.muted #scan-note { "Only the newest " (LIST_LIMIT_MAX) " rows were read; narrow the filters to see older runs." }
        }
        (run_table(&runs, now, None, viewer, true))
    };
    Ok(markup.into_string())
}

/// The runs already due (`upcoming` false: newest first) or still to come (`upcoming`
/// true: soonest first) at `now`, a page at most. `rows` are newest tick first.
fn split_at_now(rows: Vec<Run>, now: DateTime<Utc>, upcoming: bool) -> Vec<Run> {
    let page = usize::try_from(LIMIT).unwrap_or(100);
    if upcoming {
        let mut ahead: Vec<Run> = rows.into_iter().filter(|run| run.fire_at > now).collect();
        ahead.sort_by(|a, b| (a.fire_at, &a.idempotency_key).cmp(&(b.fire_at, &b.idempotency_key)));
        ahead.truncate(page);
        ahead
    } else {
        rows.into_iter()
            .filter(|run| run.fire_at <= now)
            .take(page)
            .collect()
    }
}

/// Links to the views, the filters kept.
fn view_tabs(view: View, filter: &RunFilter, status: Option<&str>) -> Markup {
    let tabs = [
        (View::Fired, "recent", "Fired"),
        (View::Upcoming, "upcoming", "Upcoming"),
        (View::InFlight, "in_flight", "In flight"),
        (View::DeadLetters, "dead_letters", "Dead letters"),
    ];
    let mut keep = Vec::new();
    if let Some(status) = status {
        keep.push(format!("status={status}"));
    }
    if let Some(id) = &filter.schedule_id {
        keep.push(format!("schedule_id={id}"));
    }
    if let Some(id) = &filter.workflow_id {
        keep.push(format!("workflow_id={id}"));
    }
    html! {
        nav.tabs #run-views aria-label="Views" {
            @for (v, value, label) in tabs {
                @let query = std::iter::once(format!("view={value}")).chain(keep.iter().cloned()).collect::<Vec<_>>();
                a href=(format!("/ui/runs?{}", query.join("&"))) data-view=(value)
                    aria-current=[(v == view).then_some("page")] { (label) }
            }
        }
    }
}

fn filters(view: View, status: Option<&str>, filter: &RunFilter) -> Markup {
    let views = [
        (View::Fired, "recent", "fired"),
        (View::Upcoming, "upcoming", "upcoming"),
        (View::InFlight, "in_flight", "in flight"),
        (View::DeadLetters, "dead_letters", "dead letters"),
    ];
    html! {
        form.filters #run-filters method="get" action="/ui/runs" {
            div.field {
                label for="f-view" { "Show" }
                select #f-view name="view" {
                    @for (v, value, label) in views { option value=(value) selected[v == view] { (label) } }
                }
            }
            div.field {
                label for="f-status" { "Status (fired, upcoming)" }
                select #f-status name="status" {
                    option value="" selected[status.is_none()] { "any" }
                    @for s in RunStatus::ALL {
                        option value=(s.as_str()) selected[status == Some(s.as_str())] { (s.as_str()) }
                    }
                }
            }
            div.field {
                label for="f-schedule" { "Schedule" }
                input #f-schedule name="schedule_id" value=(filter.schedule_id.clone().unwrap_or_default());
            }
            div.field {
                label for="f-workflow" { "Workflow" }
                input #f-workflow name="workflow_id" value=(filter.workflow_id.clone().unwrap_or_default());
            }
            button type="submit" { "Filter" }
        }
    }
}

/// A table of runs. Times are in `zone` (and UTC) when given, else in UTC. With
/// `show_schedule`, a column links each run's schedule. Each tick links the run's page. A
/// deployer gets the actions of [`run_actions`] on each run.
pub(crate) fn run_table(
    runs: &[Run],
    now: DateTime<Utc>,
    zone: Option<&str>,
    viewer: Viewer,
    show_schedule: bool,
) -> Markup {
    // A time in the zone breaks only before its `(zone)`.
    let when = |at: DateTime<Utc>| match zone {
        Some(zone) => zoned(at, zone),
        None => html! { span.nowrap { (utc(at)) } },
    };
    let opt = |at: Option<DateTime<Utc>>| at.map_or_else(|| html! { "—" }, when);
    html! {
        @if runs.is_empty() {
            p.empty #no-runs { "No runs." }
        } @else {
            div.table-wrap { table.runs #runs {
                thead { tr {
                    @if show_schedule { th scope="col" { "Schedule" } }
                    th scope="col" { "Status" }
                    th scope="col" { "Attempt" }
                    th scope="col" { "Tick" }
                    th scope="col" { "Started / finished" }
                    th scope="col" { "Executor" }
                    th scope="col" { "Reason" }
                    @if viewer.can_write { th.actions-head scope="col" { "Actions" } }
                } }
                tbody { @for run in runs {
                    tr.run data-key=(run.idempotency_key) data-status=(run.status.as_str()) data-fire-at=(rfc3339(run.fire_at)) {
                        @if show_schedule {
                            td data-label="Schedule" {
                                a href=(format!("/ui/schedules/{}", run.schedule_id)) { (run.schedule_id) }
                                br; small.muted { (run.workflow_id) " v" (run.version) }
                            }
                        }
                        td data-label="Status" {
                            span class=(format!("status status-{}", run.status.as_str().to_lowercase())) { (run.status.as_str()) }
                            " " small.muted { (run.source.as_str()) }
                            @if run.status.in_flight() || run.status == RunStatus::Retrying {
                                br; small.inflight { "in flight for " (span(in_flight_for(run, now))) }
                            }
                            @if let Some(at) = run.dead_lettered_at {
                                br; small.dead { "dead-lettered " (utc(at)) }
                            }
                            (crate::late::mark(run, now))
                        }
                        td data-label="Attempt" { (run.attempt) }
                        td.wrap data-label="Tick" {
                            a.run-link href=(run_href(&run.idempotency_key)) title=(format!("Run {}", run.idempotency_key)) {
                                time datetime=(rfc3339(run.run_at)) { (when(run.run_at)) }
                            }
                            @if zone.is_some_and(|zone| !is_utc(zone)) { br; small.muted { (utc(run.run_at)) } }
                        }
                        td.wrap data-label="Started / finished" { (opt(run.started_at)) br; (opt(run.finished_at)) }
                        td data-label="Executor" { (run.executor_id.clone().unwrap_or_else(|| "—".into())) }
                        td.reason data-label="Reason" { (words(run.reason.as_deref().or(run.last_error.as_deref()).unwrap_or_default())) }
                        @if viewer.can_write {
                            td.actions-cell data-label="Actions" { (run_actions(run)) }
                        }
                    }
                } }
            } }
            @if viewer.can_write { (cancel_form()) }
        }
    }
}
