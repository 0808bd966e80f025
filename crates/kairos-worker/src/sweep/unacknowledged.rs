//! Waves left unacknowledged: a dispatcher records a wave's launches `ENQUEUED` and commits
//! before it publishes them, and acknowledges the wave once every PubAck is in. A wave
//! still unacknowledged after `unacknowledged_after` belongs to a dispatcher that died (or
//! lost its database) in between, having published all, some or none of it. Its runs
//! still `ENQUEUED` in the attempt the wave launched are published again under their own
//! `Nats-Msg-Id`, so the stream drops as duplicates those it already stored, and the wave
//! is closed. A wave whose publish fails again stays for the next sweep.

use kairos_core::Run;
use kairos_launcher::{LaunchMessage, RunLauncher};
use kairos_store::dispatch::waves;
use kairos_store::Tx;

use super::Sweeper;
use crate::messages::{as_claimed, message, Dags};
use crate::Result;

/// Unacknowledged waves handled per sweep.
const WAVES_PER_SWEEP: i64 = 20;

impl<L: RunLauncher> Sweeper<L> {
    /// Publishes again the runs of the waves left unacknowledged, and closes each whose
    /// publishes all went through, in one transaction holding their rows.
    pub(super) async fn publish_unacknowledged(&self) -> Result<()> {
        let mut tx = Tx::begin(&self.pool).await?;
        let grace_s = self.config.unacknowledged_after.as_secs_f64();
        let found = waves::unacknowledged(&mut tx, grace_s, WAVES_PER_SWEEP).await?;
        if found.is_empty() {
            return Ok(());
        }
        let mut closed = Vec::new();
        for (wave, runs) in found {
            if self.publish_again(&mut tx, &runs).await? {
                closed.push(wave);
            }
        }
        waves::close(&mut tx, &closed).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Publishes `runs` again under their own message ids; whether every publish was
    /// acknowledged.
    async fn publish_again(&self, tx: &mut Tx, runs: &[Run]) -> Result<bool> {
        if runs.is_empty() {
            return Ok(true);
        }
        let claimed: Vec<_> = runs.iter().map(as_claimed).collect();
        let dags = Dags::load(tx, &claimed).await?;
        let same: Vec<(LaunchMessage, String)> = claimed
            .iter()
            .map(|run| {
                let message = message(run, dags.get(run).cloned().unwrap_or_default());
                let id = message.msg_id();
                (message, id)
            })
            .collect();
        let acks = self.launcher.redeliver(&same).await;
        let stored = acks.iter().filter(|ack| ack.is_ok()).count();
        let duplicates = acks
            .iter()
            .filter(|ack| ack.as_ref().is_ok_and(|ack| ack.duplicate))
            .count();
        if let Some(Err(err)) = acks.iter().find(|ack| ack.is_err()) {
            tracing::warn!(
                runs = runs.len(),
                failed = runs.len() - stored,
                error = %crate::error_chain(err),
                "launches of an unacknowledged wave not published again; next sweep",
            );
            return Ok(false);
        }
        tracing::warn!(
            runs = runs.len(),
            already_stored = duplicates,
            "launches of a wave its dispatcher never acknowledged published again",
        );
        Ok(true)
    }
}
