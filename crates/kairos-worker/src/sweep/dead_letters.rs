//! Dead letters not yet copied to the DLQ stream are published (locked while publishing,
//! like a claim: a killed sweep leaves them for the next, and the message id de-duplicates
//! a second copy).

use kairos_launcher::{DeadLetter, RunLauncher};
use kairos_store::{attempts, Tx};

use super::Sweeper;
use crate::messages::{acknowledged, as_claimed, message, Dags};
use crate::Result;

/// Dead letters copied to the DLQ stream per sweep.
const DEAD_LETTERS_PER_SWEEP: i64 = 500;

impl<L: RunLauncher> Sweeper<L> {
    /// Publishes dead letters not yet in the DLQ stream (locked while publishing, like a
    /// claim: a killed sweep leaves them for the next, and the message id de-duplicates a
    /// second copy).
    pub(super) async fn send_dead_letters(&self) -> Result<()> {
        let mut tx = Tx::begin(&self.pool).await?;
        let runs = attempts::unsent_dead_letters(&mut tx, DEAD_LETTERS_PER_SWEEP).await?;
        if runs.is_empty() {
            return Ok(());
        }
        let claimed: Vec<_> = runs.iter().map(as_claimed).collect();
        let dags = Dags::load(&mut tx, &claimed).await?;
        let letters: Vec<DeadLetter> = runs
            .iter()
            .zip(&claimed)
            .map(|(run, claimed)| DeadLetter {
                launch: message(claimed, dags.get(claimed).cloned().unwrap_or_default()),
                attempts: u32::try_from(run.attempt).unwrap_or(1),
                last_error: run.last_error.clone().or_else(|| run.reason.clone()),
            })
            .collect();
        let acks = self.launcher.dead_letter(&letters).await;
        let sent = acknowledged(
            runs.iter().map(|run| run.idempotency_key.as_str()),
            &acks,
            "dead letters not copied to the DLQ stream; retried next sweep",
        );
        let now = kairos_store::now(&mut *tx, None).await?;
        attempts::mark_sent(&mut tx, &sent, now).await?;
        tx.commit().await?;
        Ok(())
    }
}
