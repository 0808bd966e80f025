//! Publishing a round's runs: the launch message of each (`crate::messages`), the pipelined
//! publish bounded by `launch_timeout`, and the typed outcome of every publish (`ENQUEUED`,
//! retry later, or refused for good).

use kairos_launcher::{Enqueued, LaunchMessage, RunLauncher};
use kairos_store::dispatch::{Claimed, Outcome};

use super::clock::{DbClock, Stamp};
use super::decide::Decision;
use super::{report, Dispatcher};
use crate::messages::{message, Dags};

impl<L: RunLauncher> Dispatcher<L> {
    /// Publishes the runs whose decision is [`Decision::Launch`] and maps each outcome;
    /// every acknowledgement is awaited (pipelined), bounded by `launch_timeout`.
    pub(super) async fn launch(
        &self,
        live: &[Claimed],
        decisions: &[Decision],
        dags: &Dags,
        clock: Option<&DbClock>,
    ) -> Vec<Outcome> {
        let runs: Vec<(&Claimed, bool)> = live
            .iter()
            .zip(decisions)
            .filter_map(|(run, decision)| match decision {
                Decision::Launch { exclusive } => Some((run, *exclusive)),
                _ => None,
            })
            .collect();
        if runs.is_empty() {
            return Vec::new();
        }
        let messages: Vec<LaunchMessage> = runs
            .iter()
            .map(|(run, _)| {
                message(
                    run,
                    dags.get(run).expect("triage kept runs with a DAG").clone(),
                )
            })
            .collect();
        let acks =
            tokio::time::timeout(self.config.launch_timeout, self.launcher.launch(&messages)).await;
        let stamp = clock.map(DbClock::stamp);
        let outcomes: Vec<Outcome> = match acks {
            Ok(acks) => runs
                .iter()
                .zip(acks)
                .map(|((run, exclusive), ack)| launched(run, *exclusive, ack, stamp))
                .collect(),
            Err(_) => {
                let error = format!(
                    "acknowledgements did not arrive within {:?}",
                    self.config.launch_timeout
                );
                let retry = |(run, _): &(&Claimed, bool)| {
                    Outcome::retry(&run.idempotency_key, error.clone())
                };
                runs.iter().map(retry).collect()
            }
        };
        report::launched(&runs, &outcomes);
        outcomes
    }
}

/// The outcome of one publish: `ENQUEUED`, retry later (`PENDING`) or refused (`FAILED`).
fn launched(
    run: &Claimed,
    exclusive: bool,
    ack: kairos_launcher::Result<Enqueued>,
    stamp: Option<Stamp>,
) -> Outcome {
    let key = run.idempotency_key.as_str();
    match ack {
        Ok(enqueued) => Outcome::enqueued(
            key,
            enqueued.stream_sequence as i64,
            exclusive,
            stamp.map(|stamp| stamp.at(enqueued.acked_at)),
        ),
        Err(err) if err.is_retryable() => Outcome::retry(key, err.to_string()),
        Err(err) => Outcome::refused(key, err.to_string()),
    }
}
