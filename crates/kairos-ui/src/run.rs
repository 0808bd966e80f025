//! One run (`/ui/runs/{key}`): what `GET /runs/{key}` answers, for a person: the status
//! timeline, every attempt with its error and executor, the logs executors reported
//! (`attempt_logs.rs`), the launch message of the attempt published (rebuilt by the caller,
//! which owns the wire type), the chain parent and the runs the chain fired from it, and
//! (for a deployer) the cancel and retry the API allows.

use chrono::{DateTime, Utc};
use kairos_core::Attempt;
use kairos_registrar::{Registrar, Run, RunView, WorkflowView};
use maud::{html, Markup};

use crate::actions::role_note;
use crate::actions::{cancel_form, retryable, run_actions};
use crate::links::run_href;
use crate::text::words;
use crate::time::{rfc3339, span, utc};
use crate::Viewer;

/// Rebuilds the launch message of a run's current attempt from the run and its workflow
/// version, as the dispatcher publishes it: its JSON text and its `Nats-Msg-Id`.
pub type LaunchText<'a> = &'a (dyn Fn(&Run, &WorkflowView) -> (String, String) + Sync);

/// What the page says about the launch message.
enum Launch {
    /// The current attempt was published: the message's JSON text and `Nats-Msg-Id`.
    Sent { json: String, msg_id: String },
    /// The current attempt has not been published (yet, or ever).
    NotPublished,
    /// The workflow version is no longer stored, so the DAG cannot be shown.
    VersionGone,
    /// No message builder was given (the `?key=` fragment of the runs list).
    Unknown,
}

/// The page of run `key`; with `launch`, the launch message of its published attempt.
///
/// # Errors
/// [`kairos_registrar::Error::NotFound`] for an unknown run; a store error.
pub async fn run(
    registrar: &Registrar,
    key: &str,
    viewer: Viewer,
    launch: Option<LaunchText<'_>>,
) -> Result<String, kairos_registrar::Error> {
    let view = registrar.run(key).await?;
    let launch = match launch {
        None => Launch::Unknown,
        Some(_) if view.run.published_at.is_none() => Launch::NotPublished,
        Some(build) => {
            let version = i64::from(view.run.version);
            match registrar.get_workflow(&view.run.workflow_id, version).await {
                Ok(workflow) => {
                    let (json, msg_id) = build(&view.run, &workflow);
                    Launch::Sent { json, msg_id }
                }
                Err(kairos_registrar::Error::NotFound { .. }) => Launch::VersionGone,
                Err(err) => return Err(err),
            }
        }
    };
    let children = registrar.children(key).await?;
    let schedule_kept = match registrar.get(&view.run.schedule_id).await {
        Ok(_) => true,
        Err(kairos_registrar::Error::NotFound { .. }) => false,
        Err(err) => return Err(err),
    };
    let now = registrar.clock().await?;
    let run = &view.run;
    let markup = html! {
        p.crumbs { a href="/ui/runs" { "← Runs" } }
        h1 { "Run " span.status-title { span class=(status_class(run)) #run-status { (run.status.as_str()) } } }
        p.key { "Key " code #run-key { (run.idempotency_key) } }
        (role_note(viewer))
        dl.fields #run-fields {
            dt { "Schedule" }
            dd {
                a #run-schedule href=(format!("/ui/schedules/{}", run.schedule_id)) { (run.schedule_id) }
                @if !schedule_kept { " " span.badge.gone #schedule-gone { "deleted" } }
            }
            dt { "Workflow" } dd.token { (run.workflow_id) " version " (run.version) }
            dt { "User" } dd.token { (run.user_id) }
            dt { "Created by" } dd { (run.source.as_str()) }
            dt { "Tick" } dd.token { time datetime=(rfc3339(run.run_at)) { (utc(run.run_at)) } }
            dt { @if run.status == kairos_core::RunStatus::Retrying { "Next attempt due" } @else { "Fire time (with jitter)" } }
            dd.token { (utc(run.fire_at)) }
            dt { "Attempt" } dd #run-attempt {
                @if run.attempt > view.max_attempts {
                    (run.attempt) " (the retry policy allows " (view.max_attempts) "; the attempts past it were started by an operator's retry)"
                } @else {
                    (run.attempt) " of " (view.max_attempts)
                }
            }
            dt { "Executor" } dd.token #run-executor { (run.executor_id.as_deref().unwrap_or("—")) }
            dt { "Executor's run id" } dd.token { (run.run_id.as_deref().unwrap_or("—")) }
            dt { "Stream sequence" } dd { (run.stream_seq.map_or("—".to_string(), |seq| seq.to_string())) }
            dt { "Times published" } dd title="A launch not started in time is published again under the same message id; the stream drops a copy it already has." { (run.attempts) }
            dt { "Reason" } dd #run-reason { (words(run.reason.as_deref().unwrap_or("—"))) }
            dt { "Last error" } dd #run-error { (words(run.last_error.as_deref().unwrap_or("—"))) }
            (crate::late::fields(run, now))
            dt { "Chain parent" }
            dd #run-parent {
                @match &run.parent_key {
                    Some(parent) => { a.run-link href=(run_href(parent)) { code { (parent) } } }
                    None => { "— (not fired by a chain)" }
                }
            }
        }
        @if viewer.can_write && (!run.status.terminal() || retryable(run)) {
            section.actions #run-actions aria-label="Actions" {
                div.buttons { (run_actions(run)) }
                @if !run.status.terminal() { (cancel_form()) }
            }
        }
        section aria-labelledby="timeline-title" {
            h2 #timeline-title { "Timeline (UTC)" }
            (timeline(&view, now))
        }
        section aria-labelledby="attempts-title" {
            h2 #attempts-title { "Attempts" }
            (attempts(&view))
        }
        (crate::attempt_logs::section(&view.logs))
        section aria-labelledby="children-title" {
            h2 #children-title { "Chain children" }
            (children_list(&children))
        }
        (launch_section(run, launch))
    };
    Ok(markup.into_string())
}

fn status_class(run: &Run) -> String {
    format!("status status-{}", run.status.as_str().to_lowercase())
}

/// One moment of a run's life.
struct Event {
    at: DateTime<Utc>,
    what: String,
    detail: Option<String>,
}

/// The moments of the run, oldest first: written, each attempt's publish, start and end,
/// the attempt in progress, the dead letter, and who retried or cancelled it
/// (`run_changes.rs`).
fn events(view: &RunView) -> Vec<Event> {
    let run = &view.run;
    let mut events = vec![Event {
        at: run.created_at,
        what: format!("Planned ({})", run.source.as_str()),
        detail: Some(format!("tick {}", utc(run.run_at))),
    }];
    for attempt in &view.history {
        events.extend(attempt_events(attempt));
    }
    let current_done = view.history.iter().any(|a| a.attempt == run.attempt);
    if !current_done {
        let n = run.attempt;
        if let Some(at) = run.published_at {
            let seq = run.stream_seq.map(|seq| format!("stream sequence {seq}"));
            events.push(Event {
                at,
                what: format!("Attempt {n} published"),
                detail: seq,
            });
        }
        if let Some(at) = run.started_at {
            events.push(Event {
                at,
                what: format!("Attempt {n} started"),
                detail: run.executor_id.as_ref().map(|e| format!("executor {e}")),
            });
        }
        if let Some(at) = run.heartbeat_at {
            events.push(Event {
                at,
                what: "Last heartbeat".into(),
                detail: None,
            });
        }
        if let Some(at) = run.finished_at {
            events.push(Event {
                at,
                what: format!("Attempt {n} ended {}", run.status.as_str()),
                detail: run.reason.clone().or_else(|| run.last_error.clone()),
            });
        }
    }
    if let Some(at) = run.dead_lettered_at {
        events.push(Event {
            at,
            what: "Dead-lettered".into(),
            detail: run.last_error.clone(),
        });
    }
    if let Some(at) = run.late_at {
        events.push(Event {
            at,
            what: "Marked late".into(),
            detail: run.late_reason.clone(),
        });
    }
    events.extend(
        crate::run_changes::moments(&view.changes, &run.idempotency_key)
            .into_iter()
            .map(|m| Event {
                at: m.at,
                what: m.what,
                detail: m.detail,
            }),
    );
    events.sort_by_key(|event| event.at);
    events
}

fn attempt_events(attempt: &Attempt) -> Vec<Event> {
    let n = attempt.attempt;
    let mut events = Vec::new();
    if let Some(at) = attempt.published_at {
        events.push(Event {
            at,
            what: format!("Attempt {n} published"),
            detail: None,
        });
    }
    if let Some(at) = attempt.started_at {
        events.push(Event {
            at,
            what: format!("Attempt {n} started"),
            detail: attempt
                .executor_id
                .as_ref()
                .map(|e| format!("executor {e}")),
        });
    }
    events.push(Event {
        at: attempt.finished_at,
        what: format!("Attempt {n} ended {}", attempt.status.as_str()),
        detail: attempt.error.clone(),
    });
    events
}

fn timeline(view: &RunView, now: DateTime<Utc>) -> Markup {
    let run = &view.run;
    html! {
        ol.timeline #timeline {
            @for event in events(view) {
                li {
                    time datetime=(rfc3339(event.at)) { (utc(event.at)) }
                    " " strong { (event.what) }
                    @if let Some(detail) = event.detail { br; span.detail { (words(&detail)) } }
                }
            }
            li.now {
                time datetime=(rfc3339(now)) { (utc(now)) }
                " " strong { "Now: " (run.status.as_str()) }
                @if run.status.in_flight() || run.status == kairos_core::RunStatus::Retrying {
                    " · in flight for " (span(kairos_registrar::in_flight_for(run, now)))
                }
            }
        }
    }
}

fn attempts(view: &RunView) -> Markup {
    let run = &view.run;
    let current_done = view.history.iter().any(|a| a.attempt == run.attempt);
    let opt = |at: Option<DateTime<Utc>>| at.map_or_else(|| "—".to_string(), utc);
    html! {
        div.table-wrap { table.attempts #attempts {
            thead { tr {
                th scope="col" { "#" }
                th scope="col" { "Status" }
                th scope="col" { "Error" }
                th scope="col" { "Executor" }
                th scope="col" { "Published / started / ended" }
            } }
            tbody {
                @for attempt in &view.history {
                    tr.attempt data-attempt=(attempt.attempt) {
                        td data-label="#" { (attempt.attempt) }
                        td data-label="Status" { span class=(format!("status status-{}", attempt.status.as_str().to_lowercase())) { (attempt.status.as_str()) } }
                        td.reason data-label="Error" { (attempt.error.as_deref().unwrap_or("—")) }
                        td data-label="Executor" { (attempt.executor_id.as_deref().unwrap_or("—")) }
                        td data-label="Published / started / ended" {
                            (opt(attempt.published_at)) br; (opt(attempt.started_at)) br; (utc(attempt.finished_at))
                        }
                    }
                }
                @if !current_done {
                    tr.attempt.current data-attempt=(run.attempt) {
                        td data-label="#" { (run.attempt) }
                        td data-label="Status" { span class=(status_class(run)) { (run.status.as_str()) } }
                        td.reason data-label="Error" { (run.last_error.as_deref().or(run.reason.as_deref()).unwrap_or("—")) }
                        td data-label="Executor" { (run.executor_id.as_deref().unwrap_or("—")) }
                        td data-label="Published / started / ended" {
                            (opt(run.published_at)) br; (opt(run.started_at)) br; (opt(run.finished_at))
                        }
                    }
                }
            }
        } }
    }
}

fn children_list(children: &[Run]) -> Markup {
    html! {
        @if children.is_empty() {
            p.muted #run-children-none { "No run was fired by a chain from this run." }
        } @else {
            @if children.len() as i64 >= kairos_registrar::CHILDREN_MAX {
                p.muted { "The first " (children.len()) " shown." }
            }
            ul #run-children {
                @for child in children {
                    li.child data-key=(child.idempotency_key) {
                        a.run-link href=(run_href(&child.idempotency_key)) { code { (child.idempotency_key) } }
                        " " span class=(status_class(child)) { (child.status.as_str()) }
                        " schedule " (child.schedule_id) " · tick " (utc(child.run_at))
                    }
                }
            }
        }
    }
}

fn launch_section(run: &Run, launch: Launch) -> Markup {
    html! {
        @if !matches!(launch, Launch::Unknown) {
            section aria-labelledby="launch-title" {
                h2 #launch-title { "Launch message" }
                @match launch {
                    Launch::Sent { json, msg_id } => {
                        p.muted { "Attempt " (run.attempt) " as published, rebuilt from the stored run and its workflow version. Nats-Msg-Id " code #launch-msg-id { (msg_id) } }
                        pre.launch #launch-message { code { (json) } }
                    }
                    Launch::NotPublished => {
                        p.muted #launch-none { "Attempt " (run.attempt) " has not been published." }
                    }
                    Launch::VersionGone => {
                        p.muted #launch-none { "Workflow " (run.workflow_id) " version " (run.version) " is no longer stored: the message cannot be rebuilt." }
                    }
                    Launch::Unknown => {}
                }
            }
        }
    }
}
