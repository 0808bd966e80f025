//! What a viewer may do on a page: the note on their role, and the cancel and retry buttons
//! with the cancel form they open.

use kairos_core::RunStatus;
use kairos_registrar::Run;
use maud::{html, Markup};

use crate::Viewer;

/// A line telling a reader why there are no buttons.
pub(crate) fn role_note(viewer: Viewer) -> Markup {
    html! {
        @if viewer.can_write {
            p.role #role data-role="deployer" { "You may act on schedules and runs (deployer)." }
        } @else {
            p.role #role data-role="reader" { "Read only: actions need the deployer role." }
        }
    }
}

/// The form a cancel button opens (one per page; the script fills in the run).
pub(crate) fn cancel_form() -> Markup {
    html! {
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

/// The actions the API allows on `run`: cancel while it has not finished, retry once it
/// failed or timed out (launch failures before publishing included).
pub(crate) fn run_actions(run: &Run) -> Markup {
    html! {
        @if !run.status.terminal() {
            button.cancel type="button" data-key=(run.idempotency_key) aria-label=(format!("Cancel run {}", run.idempotency_key)) { "Cancel…" }
        }
        @if retryable(run) {
            button.retry type="button" data-key=(run.idempotency_key) aria-label=(format!("Retry run {}", run.idempotency_key)) { "Retry" }
        }
    }
}

/// `POST /runs/{key}/retry` takes a `FAILED` or `TIMED_OUT` run.
pub(crate) fn retryable(run: &Run) -> bool {
    matches!(run.status, RunStatus::Failed | RunStatus::TimedOut)
}
