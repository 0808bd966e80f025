//! The messages of stored runs, as the dispatcher and the sweeper publish them: each
//! version's DAG (loaded once per batch), a run's launch message, and which publishes the
//! stream acknowledged.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kairos_core::Run;
use kairos_launcher::LaunchMessage;
use kairos_store::dispatch::{self, Claimed};
use kairos_store::Tx;

use crate::Result;

/// The DAG of each `(workflow_id, version)` a batch names, shared by the launch messages of
/// its runs.
#[derive(Debug, Default)]
pub(crate) struct Dags(HashMap<(String, i32), Arc<serde_json::Value>>);

impl Dags {
    /// Loads the DAGs of every version `runs` name, in one statement.
    pub(crate) async fn load(tx: &mut Tx, runs: &[Claimed]) -> Result<Dags> {
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

    /// Adds the DAGs of the versions `runs` name that are not loaded yet (a run a round
    /// restaged may launch a version deployed after the claim), in one statement.
    pub(crate) async fn load_missing(&mut self, tx: &mut Tx, runs: &[Claimed]) -> Result<()> {
        let missing: Vec<Claimed> = runs
            .iter()
            .filter(|run| self.get(run).is_none())
            .cloned()
            .collect();
        if !missing.is_empty() {
            self.0.extend(Dags::load(tx, &missing).await?.0);
        }
        Ok(())
    }

    /// The DAG `run` launches, if its version is stored.
    pub(crate) fn get(&self, run: &Claimed) -> Option<&Arc<serde_json::Value>> {
        self.0.get(&(run.workflow_id.clone(), run.version))
    }
}

/// A run as the launch message needs it (for a publish again of its launch, in the region
/// its launch was recorded for, or a dead letter's copy of its last launch).
pub(crate) fn as_claimed(run: &Run) -> Claimed {
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
        home_region: None,
        fallback_regions: Vec::new(),
        launch_region: run.launch_region.clone(),
        region: run.launch_region.clone(),
    }
}

/// The launch message of a claimed run's attempt (`Nats-Msg-Id`: the key for attempt 1,
/// `key:n` after that).
pub(crate) fn message(run: &Claimed, dag: Arc<serde_json::Value>) -> LaunchMessage {
    LaunchMessage {
        idempotency_key: run.idempotency_key.clone(),
        schedule_id: run.schedule_id.clone(),
        workflow_id: run.workflow_id.clone(),
        version: i64::from(run.version),
        user_id: run.user_id.clone(),
        scheduled_for: LaunchMessage::timestamp(run.run_at),
        fire_at: LaunchMessage::timestamp(run.fire_at),
        source: run.source.into(),
        attempt: u32::try_from(run.attempt).unwrap_or(1),
        region: run.region.clone(),
        dag,
    }
}

/// The keys whose message the stream acknowledged (`keys` and `acks` in the same order);
/// when some were not, warns once with `retried` saying what happens to them.
pub(crate) fn acknowledged<'a, T, E>(
    keys: impl Iterator<Item = &'a str>,
    acks: &[std::result::Result<T, E>],
    retried: &str,
) -> Vec<String> {
    let sent: Vec<String> = keys
        .zip(acks)
        .filter(|(_, ack)| ack.is_ok())
        .map(|(key, _)| key.to_string())
        .collect();
    if sent.len() < acks.len() {
        tracing::warn!(unsent = acks.len() - sent.len(), "{retried}");
    }
    sent
}
