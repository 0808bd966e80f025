//! The batched status intake: every report of an instance, whatever its channel, goes
//! through one [`Applier`]. It has one or more lanes, each a loop writing one batch at a
//! time; a report goes to the lane its run key hashes to, so every report of a run goes
//! through one lane, in order, and the lanes' batches never touch the same run: they are
//! written side by side without waiting for each other. A lane's loop takes whatever
//! reports are waiting (up to [`MAX_BATCH`]; under load, what arrived while its last batch
//! was being written), and applies them in one transaction: lock the runs (one statement),
//! decide each report in order (`fold`), write the changes (one statement per kind),
//! commit, then answer each caller. No report waits for a timer: an idle intake applies a
//! lone report at once.
//!
//! - A run another transaction holds is not waited for; its reports are tried again in a
//!   later batch, once that transaction has ended or a timer runs out (`held.rs`), and
//!   later reports about it wait behind them.
//! - A batch that fails as a whole is rolled back and tried again ([`TRIES`], with
//!   back-off). When the server keeps refusing a statement of it (a constraint a report
//!   ran into), it is split in halves until the report that causes it fails alone; a
//!   broken connection fails the whole batch, whose callers retry (NATS redelivers, HTTP
//!   answers 503). A report is never applied twice: a failed batch wrote nothing.
//! - Back-pressure: at most [`MAX_WAITING`] reports wait (shared among the lanes); callers
//!   then wait to hand theirs in.
//! - Launches first: a batch starts once this process's dispatcher has no wave being
//!   recorded or published, or after `priority::MAX_YIELD` (`crate::priority`).

use std::collections::VecDeque;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kairos_store::status;

use super::report::Applied;
use kairos_store::{PgPool, Tx};
use tokio::sync::{mpsc, oneshot};

use super::decide_reports::{decide_reports, Answer, Item};
use super::held_reports::{Held, Keyed};
use super::Error;
use crate::crash::crash_point;
use crate::metrics;

/// Most reports in one transaction.
pub const MAX_BATCH: usize = 5_000;
/// Most reports waiting for the applier before callers wait to hand theirs in.
pub const MAX_WAITING: usize = 20_000;
/// Tries of a whole batch before it is split (or, when the connection is the trouble,
/// failed).
pub const TRIES: u32 = 3;

type Reply = oneshot::Sender<Result<Applied, Error>>;

struct Job {
    item: Item,
    reply: Reply,
}

/// The handle the intake's channels use. Cheap to clone; the lanes' loops end when every
/// handle is gone.
#[derive(Debug, Clone)]
pub(crate) struct Applier {
    lanes: Vec<mpsc::Sender<Job>>,
}

impl Keyed for Job {
    fn key(&self) -> &str {
        &self.item.key
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job").field("key", &self.item.key).finish()
    }
}

impl Applier {
    /// Starts `lanes` loops (at least one) on the current runtime.
    pub(crate) fn start(pool: PgPool, lanes: usize) -> Applier {
        let lanes = lanes.max(1);
        let lanes = (0..lanes)
            .map(|_| {
                let (jobs, waiting) = mpsc::channel(MAX_WAITING / lanes);
                tokio::spawn(run(pool.clone(), waiting));
                jobs
            })
            .collect();
        Applier { lanes }
    }

    /// The lane of run `key`.
    fn lane(&self, key: &str) -> &mpsc::Sender<Job> {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        let lane = usize::try_from(hasher.finish() % self.lanes.len() as u64).unwrap_or(0);
        &self.lanes[lane]
    }

    /// Applies `items` (in order where they name the same run) and answers each, in order.
    pub(crate) async fn apply(&self, items: Vec<Item>) -> Vec<Result<Applied, Error>> {
        let mut answers = Vec::with_capacity(items.len());
        for item in items {
            let (reply, answer) = oneshot::channel();
            let lane = self.lane(&item.key);
            if lane.send(Job { item, reply }).await.is_err() {
                answers.push(None);
                continue;
            }
            answers.push(Some(answer));
        }
        let mut results = Vec::with_capacity(answers.len());
        for answer in answers {
            let result = match answer {
                Some(answer) => answer.await.ok(),
                None => None,
            };
            results.push(result.unwrap_or(Err(Error::Stopped)));
        }
        results
    }
}

/// A lane's loop: one batch at a time, of the reports waiting and those about held runs whose
/// next try has come.
async fn run(pool: PgPool, mut waiting: mpsc::Receiver<Job>) {
    let mut held = Held::default();
    let mut polled = Instant::now();
    let mut open = true;
    loop {
        if held.polling() && polled.elapsed() >= super::held_reports::HOLDER_POLL {
            poll_holders(&pool, &mut held).await;
            polled = Instant::now();
        }
        let mut batch = held.due(Instant::now());
        if batch.is_empty() {
            tokio::select! {
                job = waiting.recv(), if open => match job {
                    Some(job) => held.admit(job, &mut batch),
                    None => open = false,
                },
                () = wake_at(held.next_wake(polled)) => {}
            }
            if !open && held.is_empty() {
                return;
            }
        }
        while batch.len() < MAX_BATCH {
            match waiting.try_recv() {
                Ok(job) => held.admit(job, &mut batch),
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            crate::priority::launches_out(crate::priority::MAX_YIELD).await;
            let busy = apply_batch(&pool, batch).await;
            crate::metrics::reports_held(busy.len());
            held.hold(busy, Instant::now());
        }
    }
}

/// Resolves at `at` (never, when `None`).
async fn wake_at(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Asks which of the held runs' holders have ended, and wakes their runs. A failed question
/// changes nothing: the runs' timers still run.
async fn poll_holders(pool: &PgPool, held: &mut Held<Job>) {
    match status::ended(pool, &held.holders()).await {
        Ok(ended) => held.ended(&ended, Instant::now()),
        Err(err) => {
            tracing::debug!(error = %crate::error_chain(&err), "holders of held runs not polled");
        }
    }
}

/// Applies one batch, splitting it while the server refuses a statement of it; answers
/// each decided report once a standby has the batch (`replicated`); returns the jobs whose
/// runs were busy.
async fn apply_batch(pool: &PgPool, batch: Vec<Job>) -> VecDeque<(Job, Option<i64>)> {
    let mut busy = VecDeque::new();
    let mut decided = Vec::new();
    let mut parts = VecDeque::from([batch]);
    while let Some(mut part) = parts.pop_front() {
        match apply_with_tries(pool, &part).await {
            Ok(answers) => {
                for (job, answer) in part.into_iter().zip(answers) {
                    match answer {
                        Answer::Decided(applied) => decided.push((job, applied)),
                        Answer::Busy(holder) => busy.push_back((job, holder)),
                    }
                }
            }
            Err(err) if err.is_refused_statement() && part.len() > 1 => {
                let second = part.split_off(part.len() / 2);
                parts.push_front(second);
                parts.push_front(part);
            }
            Err(err) => {
                if !crate::outage::failed("status intake", &err) {
                    tracing::warn!(reports = part.len(), error = %crate::error_chain(&err),
                        "status batch not recorded");
                }
                let err = Arc::new(err);
                for job in part {
                    let _ = job.reply.send(Err(Error::Batch(Arc::clone(&err))));
                }
            }
        }
    }
    if decided.is_empty() {
        return busy;
    }
    match super::replicated::on_a_standby(pool).await {
        Ok(()) => {
            for (job, applied) in decided {
                let _ = job.reply.send(Ok(applied));
            }
        }
        Err(err) => {
            tracing::warn!(reports = decided.len(), error = %crate::error_chain(&err),
                "status batch recorded but not yet on a standby; not acknowledged");
            let store = match err {
                Error::Store(err) => Some(Arc::new(err)),
                _ => None,
            };
            for (job, _) in decided {
                let _ = job.reply.send(Err(match &store {
                    Some(err) => Error::Batch(Arc::clone(err)),
                    None => Error::NotReplicated {
                        waited_ms: super::replicated::STANDBY_WAIT.as_millis() as u64,
                    },
                }));
            }
        }
    }
    busy
}

/// One batch in one transaction, tried again with back-off when it fails as a whole.
async fn apply_with_tries(pool: &PgPool, part: &[Job]) -> Result<Vec<Answer>, kairos_store::Error> {
    let items: Vec<Item> = part.iter().map(|job| job.item.clone()).collect();
    let mut wait = Duration::from_millis(50);
    let mut tries = 0;
    loop {
        tries += 1;
        match apply_once(pool, &items).await {
            Ok(answers) => return Ok(answers),
            Err(err) if tries >= TRIES || (err.is_refused_statement() && items.len() > 1) => {
                return Err(err)
            }
            Err(err) => {
                tracing::debug!(error = %crate::error_chain(&err), tries,
                    "status batch failed; trying again");
                tokio::time::sleep(wait).await;
                wait *= 4;
            }
        }
    }
}

/// Lock, decide, write, commit.
async fn apply_once(pool: &PgPool, items: &[Item]) -> Result<Vec<Answer>, kairos_store::Error> {
    let timer = metrics::BatchTimer::start();
    let mut keys: Vec<String> = items.iter().map(|item| item.key.clone()).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut tx = Tx::begin(pool).await?;
    let mut locked = status::lock(&mut tx, &keys, None).await?;
    let folded = decide_reports(&mut locked, items);
    status::write(&mut tx, &folded.writes, locked.now).await?;
    crash_point("intake_before_commit");
    tx.commit().await?;
    crash_point("intake_after_commit");
    metrics::status_batch(items.len(), timer.elapsed());
    Ok(folded.answers)
}
