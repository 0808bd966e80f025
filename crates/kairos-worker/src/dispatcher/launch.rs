//! Publishing a round's runs: their DAGs (loaded once per version), the launch message of
//! each, the pipelined publish bounded by `launch_timeout`, and the typed outcome of every
//! publish (`ENQUEUED`, retry later, or refused for good).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kairos_core::RunSource;
use kairos_launcher::{Enqueued, LaunchMessage, RunLauncher, Source};
use kairos_store::dispatch::{self, Claimed, Outcome};
use kairos_store::Tx;

use super::clock::Stamp;
use super::decide::Decision;
use super::round::Release;
use super::{report, Dispatcher, Result};

/// The DAG of each `(workflow_id, version)` a batch names, shared by the launch messages of
/// its runs.
#[derive(Debug, Default)]
pub(super) struct Dags(HashMap<(String, i32), Arc<serde_json::Value>>);

impl Dags {
    /// Loads the DAGs of every version `runs` name, in one statement.
    pub(super) async fn load(tx: &mut Tx, runs: &[Claimed]) -> Result<Dags> {
        let versions: HashSet<(String, i32)> = runs
            .iter()
            .map(|run| (run.workflow_id.clone(), run.version))
            .collect();
        let versions: Vec<(String, i32)> = versions.into_iter().collect();
        let dags = dispatch::dags(&mut **tx, &versions).await?;
        Ok(Dags(
            dags.into_iter()
                .map(|(version, dag)| (version, Arc::new(dag)))
                .collect(),
        ))
    }

    /// The DAG `run` launches, if its version is stored.
    pub(super) fn get(&self, run: &Claimed) -> Option<&Arc<serde_json::Value>> {
        self.0.get(&(run.workflow_id.clone(), run.version))
    }
}

impl<L: RunLauncher> Dispatcher<L> {
    /// Publishes the runs whose decision is [`Decision::Launch`] and maps each outcome;
    /// every acknowledgement is awaited (pipelined), bounded by `launch_timeout`.
    pub(super) async fn launch(
        &self,
        live: &[Claimed],
        decisions: &[Decision],
        dags: &Dags,
        release: Release,
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
        let stamp = release.stamp();
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

/// A run as the launch message needs it (for a dead letter's copy of its last launch).
pub(super) fn as_claimed(run: &kairos_store::runs::Run) -> Claimed {
    Claimed {
        idempotency_key: run.idempotency_key.clone(),
        schedule_id: run.schedule_id.clone(),
        run_at: run.run_at,
        fire_at: run.fire_at,
        source: run.source,
        status: run.status,
        attempt: run.attempt,
        exclusive: false,
        workflow_id: run.workflow_id.clone(),
        version: run.version,
        user_id: run.user_id.clone(),
        overlap_policy: kairos_core::OverlapPolicy::Allow,
        late: false,
        revision: None,
        schedule_revision: None,
    }
}

/// The launch message of a claimed run's attempt (`Nats-Msg-Id`: the key for attempt 1,
/// `key:n` after that).
pub(super) fn message(run: &Claimed, dag: Arc<serde_json::Value>) -> LaunchMessage {
    LaunchMessage {
        idempotency_key: run.idempotency_key.clone(),
        schedule_id: run.schedule_id.clone(),
        workflow_id: run.workflow_id.clone(),
        version: i64::from(run.version),
        user_id: run.user_id.clone(),
        scheduled_for: LaunchMessage::timestamp(run.run_at),
        fire_at: LaunchMessage::timestamp(run.fire_at),
        source: match run.source {
            RunSource::Schedule => Source::Schedule,
            RunSource::Manual => Source::Manual,
            RunSource::Backfill => Source::Backfill,
            RunSource::Api => Source::Api,
            RunSource::Chain => Source::Chain,
        },
        attempt: u32::try_from(run.attempt).unwrap_or(1),
        dag,
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
