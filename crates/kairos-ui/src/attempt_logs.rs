//! The logs section of the run page: per attempt, the link to its logs in the executor's
//! systems and the tail of its output, as the executor reported them. Every text is
//! escaped; a link is made only of an `http`/`https` URL (the intake refuses any other, and
//! the page checks again so a row written some other way cannot become a `javascript:`
//! link).

use kairos_core::{check_log_url, AttemptLog};
use maud::{html, Markup};

use crate::time::{rfc3339, utc};

/// The section for `logs` (one entry per attempt that reported any).
pub(crate) fn section(logs: &[AttemptLog]) -> Markup {
    html! {
        section aria-labelledby="logs-title" {
            h2 #logs-title { "Logs" }
            @if logs.is_empty() {
                p.muted #run-logs-none {
                    "No executor reported logs for this run. An executor sends "
                    code { "log_url" } " and " code { "output" } " with its status reports."
                }
            }
            @for log in logs {
                div.attempt-log data-attempt=(log.attempt) {
                    h3 { "Attempt " (log.attempt) }
                    @if let Some(url) = &log.log_url {
                        p.log-link {
                            "Logs at "
                            @if check_log_url(url).is_ok() {
                                a href=(url) rel="noopener noreferrer nofollow" { (url) }
                            } @else {
                                code { (url) }
                            }
                        }
                    }
                    @match &log.output {
                        Some(output) => pre.output { code { (output) } },
                        None => p.muted { "No output reported." },
                    }
                    p.muted { "Reported " time datetime=(rfc3339(log.updated_at)) { (utc(log.updated_at)) } }
                }
            }
        }
    }
}
