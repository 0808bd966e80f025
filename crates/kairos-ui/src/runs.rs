//! Runs (`/ui/runs`): the newest runs of every schedule, filtered by status, schedule and
//! workflow; the runs in flight and for how long; the dead letters. Also the run table the
//! schedule page shares.

use chrono::{DateTime, Utc};
use kairos_core::RunStatus;
use kairos_registrar::{in_flight_for, run_status, DeadLetterQuery, Registrar, Run, RunFilter};
use maud::{html, Markup};

use crate::list::role_note;
use crate::params::Params;
use crate::time::{in_zone, rfc3339, span, utc};
use crate::Viewer;

/// Runs per page.
const LIMIT: i64 = 100;

/// The three views of the runs page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum View {
    Recent,
    InFlight,
    DeadLetters,
}

/// The runs fragment for the query `params` (`view` = `recent` | `in_flight` |
/// `dead_letters`, `status`, `schedule_id`, `workflow_id`).
///
/// # Errors
/// `Invalid` for a bad parameter; a store error.
pub async fn runs(
    registrar: &Registrar,
    params: Params,
    viewer: Viewer,
) -> Result<String, kairos_registrar::Error> {
    let mut params = params;
    let view = match params.text("view").as_deref() {
        None | Some("recent") => View::Recent,
        Some("in_flight") => View::InFlight,
        Some("dead_letters") => View::DeadLetters,
        Some(other) => {
            params.problem(kairos_registrar::Problem::new(
                "view",
                format!("{other:?} is not recent, in_flight or dead_letters"),
            ));
            View::Recent
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
    let (runs, now) = match view {
        View::Recent => registrar.recent_runs(&filter).await?,
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
        (filters(view, status_text.as_deref(), &filter))
        p.muted {
            @match view {
                View::Recent => { "The newest " (LIMIT) " runs matching the filters, newest tick first. Times in UTC." }
                View::InFlight => { "Runs an executor still owes an answer for (ENQUEUED, STARTED) or waiting to retry, the longest in flight first. Times in UTC." }
                View::DeadLetters => { "Runs whose last attempt failed for good, newest first. Times in UTC." }
            }
        }
        (run_table(&runs, now, None, viewer, true))
    };
    Ok(markup.into_string())
}

fn filters(view: View, status: Option<&str>, filter: &RunFilter) -> Markup {
    let views = [
        (View::Recent, "recent", "newest runs"),
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
                label for="f-status" { "Status (newest runs)" }
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
/// `show_schedule`, a column links each run's schedule. A deployer gets a cancel button on
/// each run not yet finished and a retry button on each dead-lettered run.
pub(crate) fn run_table(
    runs: &[Run],
    now: DateTime<Utc>,
    zone: Option<&str>,
    viewer: Viewer,
    show_schedule: bool,
) -> Markup {
    let when = |at: DateTime<Utc>| match zone {
        Some(zone) => in_zone(at, zone),
        None => utc(at),
    };
    let opt = |at: Option<DateTime<Utc>>| at.map_or_else(|| "—".to_string(), when);
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
                    @if viewer.can_write { th scope="col" { "Actions" } }
                } }
                tbody { @for run in runs {
                    tr.run data-key=(run.idempotency_key) data-status=(run.status.as_str()) {
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
                        }
                        td data-label="Attempt" { (run.attempt) }
                        td data-label="Tick" {
                            time datetime=(rfc3339(run.run_at)) { (when(run.run_at)) }
                            @if zone.is_some() { br; small.muted { (utc(run.run_at)) } }
                        }
                        td data-label="Started / finished" { (opt(run.started_at)) br; (opt(run.finished_at)) }
                        td data-label="Executor" { (run.executor_id.clone().unwrap_or_else(|| "—".into())) }
                        td.reason data-label="Reason" { (run.reason.clone().or_else(|| run.last_error.clone()).unwrap_or_default()) }
                        @if viewer.can_write {
                            td data-label="Actions" { (run_actions(run)) }
                        }
                    }
                } }
            } }
            @if viewer.can_write {
                form.action #cancel-form hidden {
                    p { "Cancel run " code #cancel-key {} }
                    div.field {
                        label for="cancel-reason" { "Reason" }
                        input #cancel-reason name="reason" maxlength="1000";
                    }
                    button #cancel-confirm type="submit" { "Cancel this run" }
                    button #cancel-dismiss type="button" { "Keep it" }
                }
            }
        }
    }
}

fn run_actions(run: &Run) -> Markup {
    html! {
        @if !run.status.terminal() {
            button.cancel type="button" data-key=(run.idempotency_key) aria-label=(format!("Cancel run {}", run.idempotency_key)) { "Cancel…" }
        }
        @if run.dead_lettered_at.is_some() {
            button.retry type="button" data-key=(run.idempotency_key) aria-label=(format!("Retry run {}", run.idempotency_key)) { "Retry" }
        }
    }
}
