//! Cancel requests to executors, from the cancel outbox (`run_cancels`): `CANCELLING` runs whose
//! cancel message the stream has not acknowledged are published (right after the cancel is
//! committed, and again by every sweep until the stream takes it, so a cancel asked for
//! while NATS is down goes out once it is back), and `CANCELLING` runs with no confirmation
//! within `cancel_timeout` become `CANCELLED`.

use kairos_launcher::{CancelMessage, LaunchMessage, RunLauncher};
use kairos_store::{cancel, Tx};

use kairos_store::PgPool;

use super::Sweeper;
use crate::messages::acknowledged;
use crate::Result;

/// Cancel messages published per call.
const CANCELS_PER_CALL: i64 = 500;

/// Publishes the cancel messages not sent yet (locked while publishing, like a claim: a
/// killed sender leaves them for the next, and the message id de-duplicates a second
/// copy). Returns how many the stream acknowledged.
///
/// # Errors
/// [`crate::Error::Store`] when a statement fails.
pub(crate) async fn send_cancels(pool: &PgPool, launcher: &impl RunLauncher) -> Result<usize> {
    let mut tx = Tx::begin(pool).await?;
    let runs = cancel::unsent(&mut tx, CANCELS_PER_CALL).await?;
    if runs.is_empty() {
        return Ok(0);
    }
    let messages: Vec<CancelMessage> = runs
        .iter()
        .map(|run| CancelMessage {
            idempotency_key: run.idempotency_key.clone(),
            run_id: run.run_id.clone(),
            attempt: u32::try_from(run.attempt).unwrap_or(1),
            reason: run.reason.clone(),
            workflow_id: run.workflow_id.clone(),
            schedule_id: run.schedule_id.clone(),
            requested_at: LaunchMessage::timestamp(run.cancel_requested_at),
        })
        .collect();
    let acks = launcher.cancel(&messages).await;
    let sent = acknowledged(
        runs.iter().map(|run| run.idempotency_key.as_str()),
        &acks,
        "cancel messages not acknowledged; re-sent by the next sweep",
    );
    let now = kairos_store::now(&mut *tx, None).await?;
    cancel::mark_sent(&mut tx, &sent, now).await?;
    tx.commit().await?;
    for key in &sent {
        tracing::info!(
            key = %key,
            trace_id = %crate::trace_of(key),
            "cancel message sent to executors",
        );
    }
    Ok(sent.len())
}

impl<L: RunLauncher> Sweeper<L> {
    /// `CANCELLING` runs unconfirmed past `cancel_timeout` become `CANCELLED`. Returns how
    /// many.
    pub(super) async fn time_out_cancels(&self) -> Result<usize> {
        let mut tx = Tx::begin(&self.pool).await?;
        let now = kairos_store::now(&mut *tx, None).await?;
        let timeout_s = self.config.cancel_timeout.as_secs_f64();
        let keys = cancel::time_out(&mut tx, now, timeout_s).await?;
        tx.commit().await?;
        for key in &keys {
            tracing::warn!(
                key = %key,
                trace_id = %crate::trace_of(key),
                timeout_s,
                "cancel not confirmed by the executor in time; run cancelled",
            );
        }
        Ok(keys.len())
    }
}
