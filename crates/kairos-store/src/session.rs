//! Whether a database connection keeps its server session: kairos refuses to start when it
//! does not.
//!
//! kairos keeps state in each connection's session: prepared statements (named per client
//! connection, so a statement prepared by one client could run in place of another's on a
//! shared server connection), settings (`statement_timeout`), and the LISTEN of its wake-ups.
//! A pooler that hands the server connection to another client after each transaction
//! (PgBouncer's `pool_mode = transaction` or `statement`) breaks all three, so kairos
//! refuses that at start, before any statement of its own runs; session pooling
//! (`pool_mode = session`) and direct connections keep the session and work.
//!
//! The check uses two client connections and the simple query protocol only: one
//! connection reads its server process id, the other opens a transaction and reads its own,
//! then the first reads its id again. Two client connections open at once never share a
//! server process unless a pooler moved one of them, and a connection whose id changed
//! between two statements was moved too. A pooler reusing its most recent server connection
//! first (PgBouncer's default) is caught in the first round; three rounds are tried.

use sqlx::{Connection, PgConnection, Row};

use crate::{Error, Result};

/// Rounds of the check.
const ROUNDS: usize = 3;

/// Refuses a database address that does not keep a connection's server session.
///
/// # Errors
/// [`Error::SessionNotKept`] when a connection was moved between server sessions;
/// [`Error::Database`] when the check cannot connect or a statement fails.
pub async fn check_kept(url: &str) -> Result<()> {
    let mut first = PgConnection::connect(url).await?;
    for _ in 0..ROUNDS {
        let before = backend(&mut first).await?;
        let mut other = PgConnection::connect(url).await?;
        sqlx::raw_sql("begin").execute(&mut other).await?;
        let held = backend(&mut other).await?;
        let after = backend(&mut first).await?;
        sqlx::raw_sql("rollback").execute(&mut other).await?;
        other.close().await?;
        if held == before || after != before {
            return Err(Error::SessionNotKept);
        }
    }
    first.close().await?;
    Ok(())
}

/// The server process id of the session this statement ran in.
async fn backend(conn: &mut PgConnection) -> Result<i32> {
    let row = sqlx::raw_sql("select pg_backend_pid()")
        .fetch_one(&mut *conn)
        .await?;
    Ok(row.try_get::<i32, _>(0)?)
}
