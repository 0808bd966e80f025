//! The dispatcher: due `PENDING` runs → launch messages on the stream, exactly once.
//!
//! One round is one transaction: claim a batch (`FOR UPDATE SKIP LOCKED`) → launch deadline
//! → DAGs (once per version) → overlap policy (exclusive schedules serialized by an advisory
//! lock, then checked against what is in flight) → `launch` (pipelined; every PubAck
//! awaited, bounded by `launch_timeout`) → record every outcome in one statement → commit.
//! A process killed anywhere in between rolls the round back; the runs are `PENDING` again,
//! and the next dispatcher re-publishes them with the same `Nats-Msg-Id`, which the stream
//! drops as a duplicate (invariants 2 and 4). A retryable launch error leaves the run
//! `PENDING` (invariant 6); a permanent one fails it.
//!
//! [`Dispatcher::start_run`] is `POST /run-launcher/start`: insert by key, then the same
//! round restricted to that key. [`intake`] feeds NATS status messages to the store.

mod decide;
pub mod intake;
mod report;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use kairos_launcher::{LaunchMessage, RunLauncher, Source};
use kairos_store::dispatch::{self, ApiRun, Claimed, Outcome};
use kairos_store::PgPool;
use sqlx::PgConnection;

use crate::crash::crash_point;
use decide::{decide, Decision};
use report::{finished, log_failed_early, log_launched, log_settled};

/// Why a dispatcher call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database failed.
    #[error("dispatcher store call failed")]
    Store(#[from] kairos_store::Error),
    /// `POST /run-launcher/start` named a workflow version that is not stored.
    #[error("workflow {workflow_id:?} version {version} not found")]
    WorkflowNotFound {
        /// The workflow.
        workflow_id: String,
        /// Its version.
        version: i32,
    },
    /// `POST /run-launcher/start` reused a key for a different run.
    #[error("idempotency_key {key:?} already names a different run")]
    KeyInUse {
        /// The key.
        key: String,
    },
}

impl From<sqlx::Error> for Error {
    fn from(err: sqlx::Error) -> Error {
        Error::Store(kairos_store::Error::Database(err))
    }
}

/// Result of dispatcher calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How the dispatcher batches and waits.
#[derive(Debug, Clone)]
pub struct DispatcherConfig {
    /// Runs claimed per round (`scheduler.batch_size`).
    pub batch_size: i64,
    /// Longest sleep between rounds (`scheduler.tick_ms`).
    pub tick: Duration,
    /// A run unpublished this long after `fire_at` fails (`scheduler.launch_deadline_s`).
    pub launch_deadline: Duration,
    /// Longest wait for a batch's acknowledgements inside the claim transaction; must stay
    /// well inside the session's idle-in-transaction timeout (30 s).
    pub launch_timeout: Duration,
    /// How often the `max_run_seconds` / queued-release sweep runs.
    pub sweep_every: Duration,
}

impl DispatcherConfig {
    /// A config with the given batch, tick and deadline; 10 s launch timeout, 1 s sweep.
    pub fn new(batch_size: i64, tick: Duration, launch_deadline: Duration) -> Self {
        DispatcherConfig {
            batch_size,
            tick,
            launch_deadline,
            launch_timeout: Duration::from_secs(10),
            sweep_every: Duration::from_secs(1),
        }
    }
}

/// What one round did, by outcome.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Round {
    /// Runs claimed.
    pub claimed: usize,
    /// Published and `ENQUEUED`.
    pub enqueued: usize,
    /// Left `PENDING` after a retryable launch error.
    pub retry: usize,
    /// `FAILED` (permanent error or launch deadline).
    pub failed: usize,
    /// Of `failed`: the launch deadline had passed.
    pub failed_late: usize,
    /// Of `failed`: the workflow version is not stored.
    pub failed_no_workflow: usize,
    /// `SKIPPED` by overlap.
    pub skipped: usize,
    /// `QUEUED` by overlap.
    pub queued: usize,
    /// Left `PENDING` untouched (schedule held by another dispatcher, or behind a run of
    /// this batch that did not go out).
    pub deferred: usize,
    /// Fire drift of each planner tick enqueued: seconds from `run_at` to `published_at`
    /// (the database's clock after the PubAcks).
    pub drift_seconds: Vec<f64>,
}

/// A `POST /run-launcher/start` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartRequest {
    /// The caller's key.
    pub idempotency_key: String,
    /// The workflow.
    pub workflow_id: String,
    /// Its version.
    pub version: i32,
    /// The user to launch as.
    pub user_id: String,
    /// The logical time (whole seconds).
    pub scheduled_for: DateTime<Utc>,
}

/// The answer to a start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// A new run was created (false: the key existed).
    pub started: bool,
    /// The run's status now (`ENQUEUED`, or `PENDING` when the stream is unreachable).
    pub status: String,
}

/// Claims due runs and publishes them. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Dispatcher<L> {
    pool: PgPool,
    launcher: L,
    config: DispatcherConfig,
}

/// Shortest sleep between rounds, so rounds blocked by another dispatcher's locks do not spin.
const MIN_IDLE: Duration = Duration::from_millis(10);

impl<L: RunLauncher> Dispatcher<L> {
    /// A dispatcher over `pool` publishing through `launcher`.
    pub fn new(pool: PgPool, launcher: L, config: DispatcherConfig) -> Self {
        Dispatcher {
            pool,
            launcher,
            config,
        }
    }

    /// The launcher (for readiness checks).
    pub fn launcher(&self) -> &L {
        &self.launcher
    }

    /// Runs rounds until `shutdown` resolves; a round in progress finishes first.
    ///
    /// # Errors
    /// Never: a failed round is logged and retried after a tick.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) -> Result<()> {
        tokio::pin!(shutdown);
        let mut next_sweep = tokio::time::Instant::now();
        loop {
            self.sweep_when_due(&mut next_sweep).await;
            let wait = self.round_and_wait().await;
            tokio::select! {
                () = &mut shutdown => break,
                () = tokio::time::sleep(wait) => (),
            }
        }
        tracing::info!("dispatcher stopped; its last round committed, no claims held");
        Ok(())
    }

    /// One round, then how long to sleep: nothing when a full batch went out, a tick after
    /// a failure, else until the next `fire_at` (capped by the tick, so drift stays small).
    async fn round_and_wait(&self) -> Duration {
        let round = match self.round().await {
            Ok(round) => round,
            Err(err) => {
                tracing::error!(error = %crate::error_chain(&err), "dispatch round failed");
                return self.config.tick;
            }
        };
        if round.retry > 0 {
            return self.config.tick;
        }
        if round.claimed as i64 >= self.config.batch_size && round.deferred == 0 {
            return Duration::ZERO;
        }
        match dispatch::next_due_in(&self.pool, None).await {
            Ok(Some(due)) => (due + Duration::from_millis(1)).clamp(MIN_IDLE, self.config.tick),
            Ok(None) => self.config.tick,
            Err(err) => {
                tracing::warn!(error = %crate::error_chain(&err), "next fire_at unknown");
                self.config.tick
            }
        }
    }

    /// Claims one batch of due runs and dispatches it in one transaction.
    ///
    /// # Errors
    /// [`Error::Store`] when a statement fails (the round is rolled back).
    pub async fn round(&self) -> Result<Round> {
        let started = crate::metrics::BatchTimer::start();
        let mut tx = self.pool.begin().await?;
        let now = kairos_store::now(&mut *tx, None).await?;
        let deadline = self.config.launch_deadline.as_secs_f64();
        let claimed = dispatch::claim(&mut tx, now, deadline, self.config.batch_size).await?;
        if claimed.is_empty() {
            return Ok(Round::default());
        }
        let round = self.dispatch(&mut tx, claimed, now).await?;
        tx.commit().await?;
        finished(&round, started);
        Ok(round)
    }

    /// Runs the sweep: in-flight runs past `max_run_seconds` → `TIMED_OUT`, then the oldest
    /// `QUEUED` run of every schedule with nothing in flight → `PENDING`.
    ///
    /// # Errors
    /// [`Error::Store`] when a statement fails.
    pub async fn sweep(&self) -> Result<(usize, usize)> {
        let now = kairos_store::now(&self.pool, None).await?;
        let timed_out = dispatch::time_out(&self.pool, now).await?;
        for key in &timed_out {
            tracing::warn!(key = %key, "run timed out (max_run_seconds)");
        }
        crate::metrics::record_timed_out(timed_out.len());
        let released = dispatch::release_queued(&self.pool, now).await?;
        for key in &released {
            tracing::info!(key = %key, "queued run released (nothing in flight)");
        }
        Ok((timed_out.len(), released.len()))
    }

    async fn sweep_when_due(&self, next_sweep: &mut tokio::time::Instant) {
        if tokio::time::Instant::now() < *next_sweep {
            return;
        }
        *next_sweep = tokio::time::Instant::now() + self.config.sweep_every;
        if let Err(err) = self.sweep().await {
            tracing::warn!(error = %crate::error_chain(&err), "sweep failed");
        }
    }

    /// Decides, publishes and records the claimed runs inside `tx`.
    async fn dispatch(
        &self,
        tx: &mut PgConnection,
        claimed: Vec<Claimed>,
        now: DateTime<Utc>,
    ) -> Result<Round> {
        let mut round = Round {
            claimed: claimed.len(),
            ..Round::default()
        };
        let mut outcomes = Vec::with_capacity(claimed.len());
        // Deadline and DAG first: a run failed here never blocks another by overlap.
        let versions: HashSet<(String, i32)> = claimed
            .iter()
            .map(|run| (run.workflow_id.clone(), run.version))
            .collect();
        let versions: Vec<(String, i32)> = versions.into_iter().collect();
        let dags = dispatch::dags(&mut *tx, &versions).await?;
        let mut live = Vec::with_capacity(claimed.len());
        for run in claimed {
            let dag = dags.get(&(run.workflow_id.clone(), run.version));
            match (run.late, dag) {
                (true, _) => {
                    round.failed_late += 1;
                    outcomes.push(failed(&run, "launch deadline passed"));
                }
                (false, None) => {
                    round.failed_no_workflow += 1;
                    let reason = format!(
                        "workflow {:?} version {} not found",
                        run.workflow_id, run.version
                    );
                    outcomes.push(failed(&run, &reason));
                }
                (false, Some(_)) => live.push(run),
            }
        }
        log_failed_early(&outcomes);
        let decisions = self.overlap(tx, &live).await?;
        let to_launch: Vec<(&Claimed, bool)> = live
            .iter()
            .zip(&decisions)
            .filter_map(|(run, decision)| match decision {
                Decision::Launch { exclusive } => Some((run, *exclusive)),
                _ => None,
            })
            .collect();
        let launched = self.launch(&to_launch, &dags).await;
        crash_point("dispatcher_after_ack");
        let enqueued: HashSet<&str> = launched
            .iter()
            .filter(|o| o.status == "ENQUEUED")
            .map(|o| o.idempotency_key.as_str())
            .collect();
        for (run, decision) in live.iter().zip(&decisions) {
            if let Some(outcome) = settle(run, decision, &enqueued) {
                log_settled(run, &outcome);
                outcomes.push(outcome);
            }
        }
        log_launched(&to_launch, &launched);
        outcomes.extend(launched);
        round.drift_seconds = dispatch::record(tx, &outcomes, now, None).await?;
        tally(&mut round, &outcomes);
        Ok(round)
    }

    /// The overlap decisions for `runs` (advisory locks taken on their exclusive schedules).
    async fn overlap(&self, tx: &mut PgConnection, runs: &[Claimed]) -> Result<Vec<Decision>> {
        let exclusive: HashSet<String> = runs
            .iter()
            .filter(|run| run.overlap_policy != "allow")
            .map(|run| run.schedule_id.clone())
            .collect();
        let exclusive: Vec<String> = exclusive.into_iter().collect();
        let held = dispatch::lock_schedules(tx, &exclusive).await?;
        let held_ids: Vec<String> = held.iter().cloned().collect();
        let blockers = dispatch::blockers(tx, &held_ids).await?;
        Ok(decide(runs, &held, &blockers))
    }

    /// Publishes the runs to launch and maps each outcome; every acknowledgement is awaited
    /// (pipelined), bounded by `launch_timeout`.
    async fn launch(
        &self,
        runs: &[(&Claimed, bool)],
        dags: &HashMap<(String, i32), serde_json::Value>,
    ) -> Vec<Outcome> {
        if runs.is_empty() {
            return Vec::new();
        }
        let messages: Vec<LaunchMessage> = runs
            .iter()
            .map(|(run, _)| message(run, &dags[&(run.workflow_id.clone(), run.version)]))
            .collect();
        let results =
            tokio::time::timeout(self.config.launch_timeout, self.launcher.launch(&messages)).await;
        let results: Vec<std::result::Result<i64, (bool, String)>> = match results {
            Ok(results) => results
                .into_iter()
                .map(|r| {
                    r.map(|e| e.stream_sequence as i64)
                        .map_err(|err| (err.is_retryable(), err.to_string()))
                })
                .collect(),
            Err(_) => {
                let reason = format!(
                    "acknowledgements did not arrive within {:?}",
                    self.config.launch_timeout
                );
                vec![Err((true, reason)); runs.len()]
            }
        };
        runs.iter()
            .zip(results)
            .map(|((run, exclusive), result)| launched(run, *exclusive, result))
            .collect()
    }

    /// `POST /run-launcher/start`: creates the run by key (source `api`, due now) unless it
    /// exists, then publishes it at once. A stream that cannot take it now leaves it
    /// `PENDING` for the dispatcher loop.
    ///
    /// # Errors
    /// [`Error::WorkflowNotFound`], [`Error::KeyInUse`] (the key names a different run), or
    /// [`Error::Store`].
    pub async fn start_run(&self, request: &StartRequest) -> Result<Started> {
        let version = (request.workflow_id.clone(), request.version);
        if dispatch::dags(&self.pool, std::slice::from_ref(&version))
            .await?
            .is_empty()
        {
            return Err(Error::WorkflowNotFound {
                workflow_id: request.workflow_id.clone(),
                version: request.version,
            });
        }
        let run = ApiRun {
            idempotency_key: request.idempotency_key.clone(),
            workflow_id: request.workflow_id.clone(),
            version: request.version,
            user_id: request.user_id.clone(),
            scheduled_for: request.scheduled_for,
        };
        let now = kairos_store::now(&self.pool, None).await?;
        let started = dispatch::insert_api_run(&self.pool, &run, now).await?;
        if started {
            self.dispatch_key(&request.idempotency_key).await?;
        }
        let mut conn = self.pool.acquire().await?;
        let stored = kairos_store::status::get(&mut conn, &request.idempotency_key)
            .await?
            .ok_or_else(|| Error::KeyInUse {
                key: request.idempotency_key.clone(),
            })?;
        let same = stored.source == "api"
            && stored.workflow_id == run.workflow_id
            && stored.version == run.version
            && stored.user_id == run.user_id
            && stored.run_at == run.scheduled_for;
        if !same {
            return Err(Error::KeyInUse {
                key: request.idempotency_key.clone(),
            });
        }
        Ok(Started {
            started,
            status: stored.status,
        })
    }

    /// One round restricted to the `PENDING` run `key`.
    async fn dispatch_key(&self, key: &str) -> Result<Round> {
        let started = crate::metrics::BatchTimer::start();
        let mut tx = self.pool.begin().await?;
        let now = kairos_store::now(&mut *tx, None).await?;
        let deadline = self.config.launch_deadline.as_secs_f64();
        let Some(claimed) = dispatch::claim_key(&mut tx, key, now, deadline).await? else {
            return Ok(Round::default());
        };
        let round = self.dispatch(&mut tx, vec![claimed], now).await?;
        tx.commit().await?;
        finished(&round, started);
        Ok(round)
    }
}

/// The launch message of a claimed run (attempt 1: `Nats-Msg-Id` = key).
fn message(run: &Claimed, dag: &serde_json::Value) -> LaunchMessage {
    LaunchMessage {
        idempotency_key: run.idempotency_key.clone(),
        schedule_id: run.schedule_id.clone(),
        workflow_id: run.workflow_id.clone(),
        version: i64::from(run.version),
        user_id: run.user_id.clone(),
        scheduled_for: LaunchMessage::timestamp(run.run_at),
        fire_at: LaunchMessage::timestamp(run.fire_at),
        source: match run.source.as_str() {
            "manual" => Source::Manual,
            "backfill" => Source::Backfill,
            "api" => Source::Api,
            _ => Source::Schedule,
        },
        attempt: 1,
        dag: dag.clone(),
    }
}

fn outcome(run: &Claimed, status: &'static str) -> Outcome {
    Outcome {
        idempotency_key: run.idempotency_key.clone(),
        status,
        stream_seq: None,
        reason: None,
        last_error: None,
        exclusive: false,
        attempted: false,
    }
}

fn failed(run: &Claimed, reason: &str) -> Outcome {
    Outcome {
        reason: Some(reason.to_string()),
        ..outcome(run, "FAILED")
    }
}

/// The outcome of one publish: `ENQUEUED`, `PENDING` (retryable) or `FAILED` (permanent).
fn launched(
    run: &Claimed,
    exclusive: bool,
    result: std::result::Result<i64, (bool, String)>,
) -> Outcome {
    let base = Outcome {
        attempted: true,
        ..outcome(run, "ENQUEUED")
    };
    match result {
        Ok(seq) => Outcome {
            stream_seq: Some(seq),
            exclusive,
            ..base
        },
        Err((true, error)) => Outcome {
            status: "PENDING",
            last_error: Some(error),
            ..base
        },
        Err((false, error)) => Outcome {
            status: "FAILED",
            reason: Some(format!("launch failed permanently: {error}")),
            last_error: Some(error),
            ..base
        },
    }
}

/// The outcome of a run that was not launched; `None` leaves it untouched (`PENDING`).
/// A skip or queue behind a run of this batch stands only if that run went out.
fn settle(run: &Claimed, decision: &Decision, enqueued: &HashSet<&str>) -> Option<Outcome> {
    let stands =
        |behind: &Option<String>| behind.as_deref().is_none_or(|key| enqueued.contains(key));
    match decision {
        Decision::Skip { reason, behind } if stands(behind) => Some(Outcome {
            reason: Some(reason.clone()),
            ..outcome(run, "SKIPPED")
        }),
        Decision::Queue { reason, behind } if stands(behind) => Some(Outcome {
            reason: Some(reason.clone()),
            ..outcome(run, "QUEUED")
        }),
        _ => None,
    }
}

fn tally(round: &mut Round, outcomes: &[Outcome]) {
    for outcome in outcomes {
        match outcome.status {
            "ENQUEUED" => round.enqueued += 1,
            "PENDING" => round.retry += 1,
            "FAILED" => round.failed += 1,
            "SKIPPED" => round.skipped += 1,
            "QUEUED" => round.queued += 1,
            _ => {}
        }
    }
    round.deferred = round.claimed - outcomes.len();
}
