//! Lost launches: an `ENQUEUED` run that no executor `STARTED` within its start timeout may
//! have had its message lost by the broker after the PubAck (one server fsyncs every two
//! minutes by default). The sweep publishes it again, under the same `Nats-Msg-Id`, so a
//! message that is only waiting for a slow executor is not doubled; when the stream answers
//! `duplicate` but no longer holds that message, it is delivered again under
//! `<msg-id>:r<n>`. The executor's first-owner rule refuses a second `STARTED`. After
//! `max_republish` re-publishes the attempt fails as never started, and the retry policy
//! applies.

use chrono::{DateTime, Utc};
use kairos_launcher::{LaunchMessage, RunLauncher};
use kairos_store::attempts::{self, Unstarted};
use kairos_store::Tx;

use super::Sweeper;
use crate::messages::{as_claimed, message, Dags};
use crate::metrics::{self, LaunchFailure};
use crate::Result;

/// Unstarted runs handled per sweep.
const UNSTARTED_PER_SWEEP: i64 = 500;

impl<L: RunLauncher> Sweeper<L> {
    /// Re-publishes (or fails as never started) the runs no executor started in time, in
    /// one transaction holding their row locks.
    /// A zero default still looks at schedules that set their own timeout.
    pub(super) async fn republish_unstarted(&self) -> Result<()> {
        let mut tx = Tx::begin(&self.pool).await?;
        let now = kairos_store::now(&mut *tx, None).await?;
        let default_s = i32::try_from(self.config.start_timeout.as_secs()).unwrap_or(i32::MAX);
        let runs = attempts::unstarted(&mut tx, now, default_s, UNSTARTED_PER_SWEEP).await?;
        if runs.is_empty() {
            return Ok(());
        }
        let max = i32::try_from(self.config.max_republish).unwrap_or(i32::MAX);
        let (again, exhausted): (Vec<Unstarted>, Vec<Unstarted>) =
            runs.into_iter().partition(|run| run.republished < max);
        let sent = self.deliver_again(&mut tx, &again).await?;
        attempts::republished(&mut tx, &sent, now).await?;
        self.fail_never_started(&mut tx, &exhausted, now).await?;
        tx.commit().await?;
        metrics::republished(sent.len() as u64);
        if !exhausted.is_empty() {
            metrics::failed_launch(LaunchFailure::NeverStarted, exhausted.len() as u64);
        }
        Ok(())
    }

    /// Publishes each run again; returns `(key, stream sequence)` of those now stored.
    async fn deliver_again(&self, tx: &mut Tx, runs: &[Unstarted]) -> Result<Vec<(String, i64)>> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let claimed: Vec<_> = runs.iter().map(|u| as_claimed(&u.run)).collect();
        let dags = Dags::load(tx, &claimed).await?;
        let messages: Vec<LaunchMessage> = claimed
            .iter()
            .map(|run| message(run, dags.get(run).cloned().unwrap_or_default()))
            .collect();
        let same: Vec<(LaunchMessage, String)> = messages
            .iter()
            .map(|message| (message.clone(), message.msg_id()))
            .collect();
        let acks = self.launcher.redeliver(&same).await;
        let mut sent = Vec::new();
        let mut lost = Vec::new();
        for ((run, message), ack) in runs.iter().zip(&messages).zip(acks) {
            let key = &run.run.idempotency_key;
            match ack {
                Ok(ack) if !ack.duplicate => sent.push((key.clone(), ack.stream_sequence as i64)),
                Ok(ack) => match self
                    .launcher
                    .is_stored(message.region.as_deref(), ack.stream_sequence)
                    .await
                {
                    Ok(true) => sent.push((key.clone(), ack.stream_sequence as i64)),
                    Ok(false) => {
                        let id = format!("{}:r{}", message.msg_id(), run.republished + 1);
                        lost.push((run, (message.clone(), id)));
                    }
                    Err(err) => {
                        tracing::warn!(
                            key = %key,
                            trace_id = %crate::trace_of(key),
                            error = %crate::error_chain(&err),
                            "cannot tell whether a launch message is still stored; next sweep",
                        )
                    }
                },
                Err(err) => {
                    tracing::warn!(
                        key = %key,
                        trace_id = %crate::trace_of(key),
                        error = %crate::error_chain(&err),
                        "re-publish failed; next sweep",
                    )
                }
            }
        }
        if !lost.is_empty() {
            let batch: Vec<(LaunchMessage, String)> = lost.iter().map(|(_, m)| m.clone()).collect();
            let acks = self.launcher.redeliver(&batch).await;
            for ((run, (_, id)), ack) in lost.iter().zip(acks) {
                if let Ok(ack) = ack {
                    tracing::warn!(
                        key = %run.run.idempotency_key,
                        trace_id = %crate::trace_of(&run.run.idempotency_key),
                        msg_id = %id,
                        "launch message lost by the stream; delivered again",
                    );
                    sent.push((run.run.idempotency_key.clone(), ack.stream_sequence as i64));
                }
            }
        }
        for (key, _) in &sent {
            tracing::warn!(
                key = %key,
                trace_id = %crate::trace_of(key),
                "run not started within its start timeout; re-published",
            );
        }
        Ok(sent)
    }

    /// Fails the attempts that were re-published `max_republish` times and still not
    /// started, then gives each its next attempt or dead-letters it.
    async fn fail_never_started(
        &self,
        tx: &mut Tx,
        runs: &[Unstarted],
        now: DateTime<Utc>,
    ) -> Result<()> {
        if runs.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = runs.iter().map(|u| u.run.idempotency_key.clone()).collect();
        let reason = format!(
            "never started: no executor reported STARTED after {} re-publishes",
            self.config.max_republish
        );
        attempts::never_started(tx, &keys, &reason, now).await?;
        let next: Vec<(String, Option<DateTime<Utc>>)> = runs
            .iter()
            .map(|u| {
                let at = u.failure.retry_policy().next_attempt_at(
                    u.run.attempt,
                    &u.run.idempotency_key,
                    now,
                );
                (u.run.idempotency_key.clone(), at)
            })
            .collect();
        let (retried, dead) = attempts::settle_timed_out(tx, &next, now).await?;
        metrics::retried(retried);
        metrics::dead_lettered(dead);
        for key in &keys {
            tracing::warn!(
                key = %key,
                trace_id = %crate::trace_of(key),
                "run never started; attempt failed",
            );
        }
        Ok(())
    }
}
