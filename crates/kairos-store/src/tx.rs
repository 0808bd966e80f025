//! The unit of work: one database transaction, opened and finished by the store, so no
//! other crate needs sqlx. Callers pass `&mut tx` to the statement functions of this crate
//! (they take the connection the transaction runs on) and end it with [`Tx::commit`]; a
//! `Tx` dropped without a commit rolls back, which is what a killed or failed caller wants
//! (docs/design.md §2 invariant "claims die with their holder").

use std::ops::{Deref, DerefMut};

use sqlx::{PgConnection, PgPool, Postgres, Transaction};

use crate::Result;

/// An open transaction.
#[derive(Debug)]
pub struct Tx(Transaction<'static, Postgres>);

impl Tx {
    /// Begins a transaction on a connection of `pool`.
    ///
    /// # Errors
    /// [`crate::Error::Database`] when no connection can be had or `BEGIN` fails.
    pub async fn begin(pool: &PgPool) -> Result<Tx> {
        Ok(Tx(pool.begin().await?))
    }

    /// Commits everything done in this unit of work.
    ///
    /// # Errors
    /// [`crate::Error::Database`] when `COMMIT` fails (then nothing was committed).
    pub async fn commit(self) -> Result<()> {
        self.0.commit().await?;
        Ok(())
    }

    /// Rolls back now, releasing the row locks taken at once (a dropped `Tx` rolls back
    /// only when its connection is next used, holding its locks until then).
    ///
    /// # Errors
    /// [`crate::Error::Database`] when `ROLLBACK` fails.
    pub async fn rollback(self) -> Result<()> {
        self.0.rollback().await?;
        Ok(())
    }
}

impl Deref for Tx {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        &self.0
    }
}

impl DerefMut for Tx {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.0
    }
}
