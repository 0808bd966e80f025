//! Why a worker role's call failed: the dispatcher's and the sweeper's.

/// Why a dispatcher or sweeper call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database failed.
    #[error("worker store call failed")]
    Store(#[from] kairos_store::Error),
    /// Bringing a run in line with its schedule's new revision failed.
    #[error("dispatcher could not restage a run of a changed schedule")]
    Restage(#[from] kairos_registrar::Error),
    /// Writing the ticks of paused schedules with a deadline as `SKIPPED` runs failed.
    #[error("sweeper could not write the ticks of paused schedules with a deadline")]
    PausedTicks(#[source] kairos_registrar::Error),
}

/// Result of dispatcher calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;
