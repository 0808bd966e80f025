//! The operator page of kairos (`/ui`): what a person opens to see schedules and runs and to
//! act on them.
//!
//! The page is in two parts, so that it needs nothing the API does not already check:
//! - a **shell** per page ([`shell`]): static HTML with no data, served without auth (a
//!   browser navigation cannot carry a bearer token), plus the script and style compiled in
//!   ([`SCRIPT`], [`STYLE`]);
//! - **fragments** ([`schedules`], [`schedule`], [`backfill_plan`], [`runs`], which with
//!   `key` is one run's page): server-rendered
//!   HTML the shell's script fetches with the bearer token kept in the tab's
//!   `sessionStorage`. The API serves them behind the same role check as its JSON reads
//!   (reader) and renders the registrar's answers; a caller who may deploy gets the action
//!   buttons, a reader none.
//!
//! The script reloads the fragment every few seconds while nothing on the page is being
//! edited, and shows an API's 404 as a not-found page that says what is missing.
//!
//! Every action (pause, pause until, resume, trigger, backfill, skip one fire time and take the
//! skip back, retry, cancel, delete) is a same-origin `fetch`
//! of the public JSON API, so its auth, validation, JSON-only and Origin checks apply as
//! to any client, and its problem+json answers are shown as they come.
//!
//! This crate renders; it knows no HTTP status codes (the API maps [`kairos_registrar::Error`]).

mod actions;
mod attempt_logs;
mod chart;
mod history;
mod late;
mod links;
mod list;
mod params;
mod run;
mod run_changes;
mod runs;
mod schedule;
mod tabs;
mod text;
mod time;
mod upcoming;
mod words;
mod workflow;

pub use list::schedules;
pub use params::Params;
pub use run::{run, LaunchText};
pub use runs::runs;
pub use schedule::{backfill_plan, schedule};
pub use words::describe;
pub use workflow::workflow;

use maud::{html, Markup, DOCTYPE};

/// The page's script (`/ui/assets/app.js`): the tabs, then the page itself.
pub const SCRIPT: &str = concat!(
    include_str!("assets/tabs.js"),
    include_str!("assets/app.js")
);
/// The page's style sheet (`/ui/assets/app.css`).
pub const STYLE: &str = include_str!("assets/app.css");

/// What the fragment renderers need to know about the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Viewer {
    /// The caller may deploy: the page shows the action buttons.
    pub can_write: bool,
}

/// The pages of the operator page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Page {
    /// `/ui`: the schedules list.
    Schedules,
    /// `/ui/schedules/{id}`: one schedule.
    Schedule(String),
    /// `/ui/runs`: runs across schedules.
    Runs,
    /// `/ui/workflows/{id}`: a workflow's versions and DAG.
    Workflow(String),
    /// `/ui/runs/{key}`: one run.
    Run(String),
}

impl Page {
    /// What the script calls the page (`data-page`), to word a not-found answer.
    fn kind(&self) -> &'static str {
        match self {
            Page::Schedules => "schedules",
            Page::Schedule(_) => "schedule",
            Page::Runs => "runs",
            Page::Workflow(_) => "workflow",
            Page::Run(_) => "run",
        }
    }

    fn title(&self) -> String {
        match self {
            Page::Schedules => "Schedules".to_string(),
            Page::Schedule(id) => format!("Schedule {id}"),
            Page::Runs => "Runs".to_string(),
            Page::Workflow(id) => format!("Workflow {id}"),
            Page::Run(key) => format!("Run {key}"),
        }
    }

    /// The fragment the shell loads (its query string is the page's own).
    fn fragment(&self) -> String {
        match self {
            Page::Schedules => "/ui/fragments/schedules".to_string(),
            Page::Schedule(id) => format!("/ui/fragments/schedules/{id}"),
            Page::Runs => "/ui/fragments/runs".to_string(),
            Page::Workflow(id) => format!("/ui/fragments/workflows/{id}"),
            Page::Run(key) => format!("/ui/fragments/runs/{key}"),
        }
    }
}

/// The shell of `page`: navigation, the token form, and a placeholder the script fills with
/// the page's fragment. `auth_mode` (`none`, `tokens`, `jwt`) tells the script whether to
/// ask for a bearer token. Holds no data, so it is served without auth.
pub fn shell(page: &Page, auth_mode: &str) -> String {
    let markup: Markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "kairos · " (page.title()) }
                link rel="stylesheet" href="/ui/assets/app.css";
            }
            body data-auth=(auth_mode) data-fragment=(page.fragment()) data-page=(page.kind()) {
                a.skip href="#content" { "Skip to content" }
                header.top {
                    a.brand href="/ui" { "kairos" }
                    nav aria-label="Main" {
                        a href="/ui" aria-current=[(*page == Page::Schedules).then_some("page")] { "Schedules" }
                        a href="/ui/runs" aria-current=[(*page == Page::Runs).then_some("page")] { "Runs" }
                    }
                    button #forget type="button" hidden { "Forget token" }
                }
                section #token-panel hidden aria-labelledby="token-title" {
                    h2 #token-title { "Sign in" }
                    p { "This kairos requires a bearer token. It is kept in this browser tab only (session storage) and sent with each request." }
                    form #token-form {
                        label for="token" { "Bearer token" }
                        input #token name="token" type="password" autocomplete="off" required;
                        button type="submit" { "Use token" }
                    }
                }
                div #flash role="status" aria-live="polite" {}
                p.refresh #refresh-note hidden {
                    "Refreshes every few seconds; paused while you edit a form. "
                    span #refresh-state {}
                }
                main #content tabindex="-1" aria-busy="true" {
                    p.muted { "Loading…" }
                    noscript { p { "This page needs JavaScript to send your token with each request." } }
                }
                script src="/ui/assets/app.js" {}
            }
        }
    };
    markup.into_string()
}

/// The page for a `/ui` path that names nothing (`path`, as asked): the page's look, what
/// is missing, and where to go instead. Holds no data and loads no script.
pub fn not_found(path: &str) -> String {
    let markup: Markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "kairos · Not found" }
                link rel="stylesheet" href="/ui/assets/app.css";
            }
            body data-page="not-found" {
                header.top {
                    a.brand href="/ui" { "kairos" }
                    nav aria-label="Main" {
                        a href="/ui" { "Schedules" }
                        a href="/ui/runs" { "Runs" }
                    }
                }
                main #content {
                    section.not-found #not-found aria-labelledby="not-found-title" {
                        h1 #not-found-title { "Not found" }
                        p.lead #not-found-lead {
                            "Nothing here: " code { (path) } " is not a page of kairos. The link is wrong or out of date."
                        }
                        p.links {
                            a href="/ui" { "Schedules" }
                            a href="/ui/runs" { "Runs" }
                        }
                    }
                }
            }
        }
    };
    markup.into_string()
}
