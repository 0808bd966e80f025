//! Wake-up signals between instances: a LISTEN connection on one NOTIFY channel.
//!
//! - [`SCHEDULES_CHANNEL`]: a schedule became plannable (a trigger on `schedules`, see
//!   `migrations/20260102000000_planner.sql`); planners listen.
//! - [`RUNS_CHANNEL`]: a run became due now (trigger-now, backfill, a `QUEUED` run
//!   released, a run-launcher start, a planner pass that wrote runs); dispatchers listen.
//!
//! A signal is only an optimisation: every loop also caps its sleep, so a lost
//! notification delays work by at most one tick and never loses it.

use sqlx::postgres::PgListener;
use sqlx::{PgExecutor, PgPool};

use crate::Result;

/// The channel planners listen on.
pub const SCHEDULES_CHANNEL: &str = "kairos_schedules";
/// The channel dispatchers listen on.
pub const RUNS_CHANNEL: &str = "kairos_runs";

/// A LISTEN connection on one channel.
#[derive(Debug)]
pub struct Wakeups {
    listener: PgListener,
}

impl Wakeups {
    /// Opens a connection from `pool`'s options and listens on `channel`.
    ///
    /// # Errors
    /// [`crate::Error::Database`] when it cannot connect or LISTEN.
    pub async fn listen(pool: &PgPool, channel: &str) -> Result<Wakeups> {
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen(channel).await?;
        Ok(Wakeups { listener })
    }

    /// Waits for the next notification. After a lost connection it reconnects and
    /// re-listens; a notification sent while it was down is lost, which is why every loop
    /// also caps its sleep.
    ///
    /// # Errors
    /// [`crate::Error::Database`] when the connection is lost and cannot be re-opened.
    pub async fn next(&mut self) -> Result<()> {
        self.listener.recv().await?;
        Ok(())
    }
}

/// Signals dispatchers that a run is due now. Inside a transaction the signal is sent at
/// its commit (and not at all on a rollback); PostgreSQL folds a transaction's signals
/// into one.
///
/// # Errors
/// [`crate::Error::Database`] when the statement fails.
pub async fn runs_due(db: impl PgExecutor<'_>) -> Result<()> {
    sqlx::query("select pg_notify($1, '')")
        .bind(RUNS_CHANNEL)
        .execute(db)
        .await?;
    Ok(())
}
