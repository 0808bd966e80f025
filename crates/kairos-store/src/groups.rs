//! kairos-core's run phases as SQL lists (`('ENQUEUED', 'STARTED', …)`), written into the
//! statements from the enum, so no statement spells a status group by hand. They go into the
//! statement text as literals, not as bound arrays: PostgreSQL matches a statement's
//! `status in (…)` against a partial index built on the same group only when it can read
//! the list (a bound parameter hides it). `tests/status_groups.rs` checks that the partial
//! indexes and triggers of the migrations are built on these same groups.

use std::sync::LazyLock;

use kairos_core::RunStatus;

/// `status in` this list: the statuses of `phase`, quoted.
pub(crate) fn list(phase: fn(RunStatus) -> bool) -> String {
    let names: Vec<String> = RunStatus::every(phase)
        .map(|status| format!("'{}'", status.as_str()))
        .collect();
    format!("({})", names.join(", "))
}

/// Runs that hold their schedule ([`RunStatus::holds_schedule`]; partial index
/// `schedule_runs_in_flight`, table `runs_in_flight`).
pub(crate) static HOLDING: LazyLock<String> = LazyLock::new(|| list(RunStatus::holds_schedule));

/// Runs the dispatcher claims once due ([`RunStatus::awaits_launch`]; partial indexes
/// `schedule_runs_claim` and `schedule_runs_due`).
pub(crate) static AWAITING_LAUNCH: LazyLock<String> =
    LazyLock::new(|| list(RunStatus::awaits_launch));

/// Runs whose current attempt is not published ([`RunStatus::unpublished`]).
pub(crate) static UNPUBLISHED: LazyLock<String> = LazyLock::new(|| list(RunStatus::unpublished));

/// Ticks whose first attempt is not published ([`RunStatus::planned`]).
pub(crate) static PLANNED: LazyLock<String> = LazyLock::new(|| list(RunStatus::planned));

/// [`PLANNED`] and `CANCELLED`: the never-published runs a schedule write may keep or bring
/// back.
pub(crate) static REVIVABLE: LazyLock<String> =
    LazyLock::new(|| list(|s| s.planned() || s == RunStatus::Cancelled));

/// Runs nothing moves any more ([`RunStatus::terminal`]): a late run in this set has its
/// deadline closed (`kairos_store::deadlines`).
pub(crate) static TERMINAL: LazyLock<String> = LazyLock::new(|| list(RunStatus::terminal));

/// Runs waiting behind their `queue` schedule's runs in flight (partial index
/// `schedule_runs_queued`).
pub(crate) static QUEUED: LazyLock<String> = LazyLock::new(|| list(|s| s == RunStatus::Queued));
