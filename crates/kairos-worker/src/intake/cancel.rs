//! Operator cancel of a run (`POST /runs/{key}/cancel`): the store moves the run in one
//! statement (`kairos_store::cancel`), and a run that became `CANCELLING` has its cancel
//! message published at once by this instance's dispatcher when it has one; otherwise, or
//! when NATS cannot take it now, the next sweep of any instance sends it.

use kairos_core::{Actor, Change, ChangeKind, FieldChange, Subject};
use kairos_store::cancel::{self, Cancel};
use kairos_store::Tx;

use super::{Intake, Result};

/// Longest operator reason.
pub const MAX_REASON_TEXT: usize = 1000;

impl Intake {
    /// Cancels the run `key`: see [`kairos_store::cancel`] for what each status becomes.
    /// `reason` is the operator's (written on the run after "cancelled by an operator").
    ///
    /// # Errors
    /// [`super::Error::Store`]: nothing was recorded.
    pub async fn cancel(&self, key: &str, reason: Option<&str>) -> Result<Cancel> {
        self.cancel_by(key, reason, &Actor::system()).await
    }

    /// [`Intake::cancel`] on behalf of `actor`: a cancel that moved the run is recorded in
    /// the history of changes (with the reason as its note) in the same transaction.
    ///
    /// # Errors
    /// [`super::Error::Store`]: nothing was recorded.
    pub async fn cancel_by(
        &self,
        key: &str,
        reason: Option<&str>,
        actor: &Actor,
    ) -> Result<Cancel> {
        let note = reason;
        let reason = match reason {
            Some(reason) => format!("cancelled by an operator: {reason}"),
            None => "cancelled by an operator".to_string(),
        };
        let mut tx = Tx::begin(&self.pool).await?;
        let before = kairos_store::runs::get(&mut *tx, key).await?;
        let done = cancel::request(&mut tx, key, &reason, None).await?;
        if let (Cancel::Cancelled(run) | Cancel::Cancelling(run), Some(before)) = (&done, before) {
            let change = Change {
                subject: Subject::run(key, &run.schedule_id, &run.workflow_id),
                kind: ChangeKind::Cancel,
                actor: actor.clone(),
                note: note.map(str::to_string),
                fields: vec![FieldChange::new(
                    "status",
                    before.status.as_str(),
                    run.status.as_str(),
                )],
            };
            let now = kairos_store::now(&mut *tx, None).await?;
            kairos_store::history::record(&mut tx, &change, now).await?;
        }
        tx.commit().await?;
        tracing::info!(
            key,
            trace_id = %crate::trace_of(key),
            outcome = done.kind(),
            "cancel requested",
        );
        if let (Cancel::Cancelling(_), Some(dispatcher)) = (&done, self.dispatcher.get()) {
            if let Err(err) = dispatcher.send_cancels_now().await {
                tracing::warn!(
                    key,
                    trace_id = %crate::trace_of(key),
                    error = %crate::error_chain(&err),
                    "cancel message not sent yet; the sweep re-sends it",
                );
            }
        }
        Ok(done)
    }
}
