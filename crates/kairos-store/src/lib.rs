//! All SQL of kairos: the migrations and the statements on `schedules`,
//! `schedule_runs`, `workflows` and `calendars`.
//!
//! Every function takes an executor (`impl PgExecutor<'_>` or `&mut PgConnection`) so that
//! callers compose several statements into one unit of work: [`Tx`] (a transaction the
//! store opens and commits; callers pass `&mut tx`) or the pool itself for one statement.
//! Other crates never name sqlx: they hold a [`PgPool`] and a [`Tx`], and get and give the
//! core's plain values (`kairos_core::Schedule`, `Run`, ...; the rows sqlx reads stay in
//! here). Queries are checked at run time (no `query!` macros), so a build never needs a
//! database. "Now" is always the database's clock: callers read it once with [`now`]
//! (optionally pinned, for tests) and pass it on.

pub use sqlx::PgPool;

pub mod attempts;
pub mod backlog;
pub mod calendars;
pub mod cancel;
pub mod chains;
pub mod deadlines;
pub mod dispatch;
mod groups;
pub mod history;
pub mod marked_runs;
mod outcome;
pub mod overview;
pub mod partitions;
pub mod pauses;
pub mod planning;
pub mod replication;
pub mod retention;
mod rows;
pub mod run_logs;
pub mod run_search;
pub mod runs;
pub mod schedules;
pub mod session;
pub mod settings;
pub mod skips;
pub mod stats;
pub mod status;
pub mod status_partitions;
pub mod timing;
mod tx;
pub mod unlaunched;
pub mod wakeups;
pub mod workflows;

pub use tx::Tx;

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::migrate::{MigrateDatabase, Migrator};
use sqlx::postgres::PgPoolOptions;
use sqlx::{Executor, PgExecutor, Postgres};

/// The migrations in `migrations/` at the workspace root, embedded at build time.
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations");

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A statement failed or the connection broke.
    #[error("database query failed")]
    Database(#[from] sqlx::Error),
    /// Applying the migrations failed.
    #[error("database migration failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The address does not keep a connection's server session between transactions (a
    /// pooler in transaction or statement mode): see [`session`].
    #[error(
        "the database address does not keep a connection's session between transactions: \
         a pooler in transaction or statement mode (PgBouncer pool_mode = transaction) sits \
         in front of PostgreSQL; kairos keeps prepared statements, settings and LISTEN \
         wake-ups in the session, so it needs pool_mode = session or a direct connection"
    )]
    SessionNotKept,
}

impl Error {
    /// The server refused a statement of this transaction because of the data it touched
    /// (a constraint, a conflict, a serialization failure): a batch that hit it may succeed
    /// in smaller parts. Broken connections, time-outs and a pool with no connection are
    /// not: nothing about the data would change them.
    pub fn is_refused_statement(&self) -> bool {
        match self {
            Error::Database(sqlx::Error::Database(err)) => {
                // Class 57 (operator intervention: shutdown, cancel, idle time-out) and
                // 08 (connection) are about the session, not the data.
                let code = err.code().unwrap_or_default();
                !(code.starts_with("57") || code.starts_with("08"))
            }
            _ => false,
        }
    }

    /// There is no primary to talk to right now: the connection broke or could not be made
    /// (a failover, a restart), the server is shutting down or starting, or the session
    /// landed on a read-only standby. The same work succeeds once a primary answers again.
    pub fn is_unavailable(&self) -> bool {
        let Error::Database(err) = self else {
            return false;
        };
        unavailable(err)
    }
}

/// [`Error::is_unavailable`] for a `sqlx` error.
pub fn unavailable(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(err) => {
            // 08: connection exceptions; 57P01-57P03: admin or crash shutdown, cannot
            // connect now; 25006: a write on a read-only (standby) session.
            let code = err.code().unwrap_or_default();
            code.starts_with("08") || matches!(code.as_ref(), "57P01" | "57P02" | "57P03" | "25006")
        }
        _ => false,
    }
}

/// Result of store calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The database's current time (`now()`: the start of the current transaction), or
/// `pinned` when given, so tests can fix "now" without sleeping (docs/design.md §2 invariant
/// "the database clock decides").
///
/// # Errors
/// [`Error::Database`] when the query fails.
pub async fn now(db: impl PgExecutor<'_>, pinned: Option<DateTime<Utc>>) -> Result<DateTime<Utc>> {
    let now: DateTime<Utc> = sqlx::query_scalar("select coalesce($1::timestamptz, now())")
        .bind(pinned)
        .fetch_one(db)
        .await?;
    Ok(now)
}

/// A pool on `url`, creating the database first when it does not exist (so `kairos serve`
/// works on a fresh PostgreSQL). Every session bounds its statements and its idle time inside
/// a transaction, so no kairos session can hold back vacuum on the queue tables for long
/// (docs/design.md §7).
///
/// Sessions also plan with `random_page_cost = 1.1` (solid-state storage) instead of the
/// server's default 4: with 4, recording a batch of outcomes by key is planned as a scan and
/// hash of every due run, whose cost grows with the burst, instead of one primary-key probe
/// per outcome, whose cost does not.
///
/// And they run without JIT compilation (`jit = off`). kairos's statements touch a batch of
/// at most a few thousand runs through arrays, whose estimated cost (and that of the
/// statements its triggers run) passes the server's `jit_above_cost`; compiling them then
/// costs far more CPU than it saves, on every execution, and most of all in a burst.
///
/// # Errors
/// [`Error::Database`] when the server cannot be reached within 10 s or refuses.
pub async fn connect(url: &str, max_connections: u32) -> Result<PgPool> {
    // Before any prepared statement: a pooler that moves sessions refuses here. A database
    // that does not exist yet is checked once it is created.
    let checked = match session::check_kept(url).await {
        Ok(()) => true,
        Err(Error::Database(sqlx::Error::Database(err)))
            if err.code().as_deref() == Some("3D000") =>
        {
            false
        }
        Err(err) => return Err(err),
    };
    if !Postgres::database_exists(url).await? {
        // Another instance may create it at the same moment; only a still-missing database
        // is an error.
        if let Err(err) = Postgres::create_database(url).await {
            if !Postgres::database_exists(url).await? {
                return Err(err.into());
            }
        }
    }
    if !checked {
        session::check_kept(url).await?;
    }
    let pool = PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .after_connect(|conn, _meta| {
            Box::pin(async move {
                conn.execute(
                    "set statement_timeout = '60s'; set idle_in_transaction_session_timeout = '30s'; \
                     set random_page_cost = 1.1; set jit = off",
                )
                .await?;
                Ok(())
            })
        })
        .connect(url)
        .await?;
    Ok(pool)
}

/// Applies every pending migration.
///
/// # Errors
/// [`Error::Migrate`] when a migration fails or the applied history does not match.
pub async fn migrate(pool: &sqlx::PgPool) -> Result<()> {
    MIGRATOR.run(pool).await?;
    Ok(())
}

/// Checks that the database answers (for `/readyz`), and whether it is a primary (false: a
/// read-only standby, as behind an address that has not yet moved to a new primary).
///
/// # Errors
/// [`Error::Database`] when it does not.
pub async fn ping(db: impl PgExecutor<'_>) -> Result<bool> {
    Ok(sqlx::query_scalar("select not pg_is_in_recovery()")
        .fetch_one(db)
        .await?)
}
