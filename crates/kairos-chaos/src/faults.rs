//! The faults of a run and when they happen. Over `duration`, side by side:
//!
//! - kill -9 of a random running instance every `kill_every`, started again 0.5–2 s later;
//! - instance 1 aborted in the middle of applying a batch of status reports, at 40 % of the
//!   run before the batch's commit and at 80 % after it (crash points `intake_before_commit`,
//!   `intake_after_commit`), then started again;
//! - SIGSTOP of instance 0 at 5 % of the run for `stop_for` (longer than every timeout a
//!   kairos session or claim has), then SIGCONT;
//! - nats-server killed at 25 % of the run and started again `nats_for` later on the same
//!   port and store;
//! - `pg_ctl -m fast restart` of PostgreSQL at 60 % of the run.
//!
//! A kill, an outage and the SIGSTOP's start never overlap (they share one gate), so the
//! stop never meets an instance being restarted, and each outage's recovery is
//! measured on instances that were not restarted: from the service being back until every
//! running instance answers `/readyz` with 200 and a launch published after that instant
//! reached the executor.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Result};
use kairos_testkit::NatsServer;

use crate::executor::Executor;
use crate::fleet::Fleet;
use crate::pg::Postgres;

/// How long an instance may take to recover before the run fails.
const RECOVERY_LIMIT: Duration = Duration::from_secs(120);

/// The fault schedule.
#[derive(Debug, Clone)]
pub struct Plan {
    /// How long faults go on.
    pub duration: Duration,
    /// Time between kills.
    pub kill_every: Duration,
    /// How long instance 0 stays stopped.
    pub stop_for: Duration,
    /// How long nats-server stays down.
    pub nats_for: Duration,
    /// Seed of the kill choices.
    pub seed: u64,
}

/// One outage of a shared service and how long the instances took to recover from it.
#[derive(Debug, Clone)]
pub struct Outage {
    /// `nats` or `postgres`.
    pub what: &'static str,
    /// How long the service was down.
    pub down: Duration,
    /// From the service back to every instance ready and publishing; `None`: not within
    /// the limit.
    pub recovery: Option<Duration>,
}

/// What the faults did.
#[derive(Debug, Default)]
pub struct Tally {
    /// kill -9 count.
    pub kills: usize,
    /// Aborts in the middle of applying a batch of status reports (before, then after its
    /// commit).
    pub intake_kills: usize,
    /// SIGSTOP count.
    pub stops: usize,
    /// The stopped instance's time from SIGCONT to `/readyz` 200.
    pub stop_recovery: Option<Duration>,
    /// NATS and PostgreSQL outages.
    pub outages: Vec<Outage>,
    /// Faults that went wrong (an instance that did not come back, a server that did not
    /// restart).
    pub failures: Vec<String>,
}

/// What the faults act on.
#[derive(Debug, Clone)]
pub struct Targets {
    /// The instances.
    pub fleet: Arc<Fleet>,
    /// The executor (to see launches published after an outage).
    pub executor: Arc<Executor>,
    /// The nats-server.
    pub nats: Arc<Mutex<NatsServer>>,
    /// The PostgreSQL cluster.
    pub postgres: Arc<Postgres>,
}

/// Runs the plan to its end.
pub async fn run(plan: &Plan, targets: &Targets) -> Tally {
    let started = Instant::now();
    let gate = Arc::new(tokio::sync::Mutex::new(()));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let at = |fraction: f64| started + plan.duration.mul_f64(fraction);
    let tasks = vec![
        tokio::spawn(kills(
            plan.clone(),
            targets.clone(),
            gate.clone(),
            tally.clone(),
            started + plan.duration,
        )),
        tokio::spawn(sigstop(
            plan.stop_for,
            targets.clone(),
            gate.clone(),
            tally.clone(),
            at(0.05),
        )),
        tokio::spawn(nats_outage(
            plan.nats_for,
            targets.clone(),
            gate.clone(),
            tally.clone(),
            at(0.25),
        )),
        tokio::spawn(postgres_restart(
            targets.clone(),
            gate.clone(),
            tally.clone(),
            at(0.6),
        )),
        tokio::spawn(intake_kills(
            targets.clone(),
            gate.clone(),
            tally.clone(),
            [at(0.4), at(0.8)],
        )),
    ];
    for task in tasks {
        if let Err(err) = task.await {
            note(&tally, format!("a fault task ended abnormally: {err}"));
        }
    }
    let tally = std::mem::take(&mut *tally.lock().expect("not poisoned"));
    tally
}

pub(crate) fn note(tally: &Mutex<Tally>, failure: String) {
    eprintln!("chaos: {failure}");
    tally.lock().expect("not poisoned").failures.push(failure);
}

async fn kills(
    plan: Plan,
    targets: Targets,
    gate: Arc<tokio::sync::Mutex<()>>,
    tally: Arc<Mutex<Tally>>,
    until: Instant,
) {
    let mut random = Random(plan.seed | 1);
    loop {
        tokio::time::sleep(plan.kill_every).await;
        if Instant::now() >= until {
            return;
        }
        let _turn = gate.lock().await;
        let fleet = &targets.fleet;
        let running: Vec<usize> = (0..fleet.len()).filter(|&i| !fleet.stopped(i)).collect();
        let i = running[random.below(running.len())];
        let down = Duration::from_millis(500 + random.below(1500) as u64);
        match fleet.kill_and_restart(i, down).await {
            Ok(()) => tally.lock().expect("not poisoned").kills += 1,
            Err(err) => note(&tally, format!("after kill -9: {err:#}")),
        }
    }
}

/// At each of `when`, instance 1 is started with a crash point in the status intake: it
/// aborts in the middle of its first batch, before its commit the first time and after it
/// (before the acknowledgements) the second time, and is then started normally.
async fn intake_kills(
    targets: Targets,
    gate: Arc<tokio::sync::Mutex<()>>,
    tally: Arc<Mutex<Tally>>,
    when: [Instant; 2],
) {
    let points = ["intake_before_commit", "intake_after_commit"];
    for (at, point) in when.into_iter().zip(points) {
        tokio::time::sleep_until(at.into()).await;
        let _turn = gate.lock().await;
        match targets.fleet.crash_at(1, point).await {
            Ok(()) => tally.lock().expect("not poisoned").intake_kills += 1,
            Err(err) => note(&tally, format!("intake kill at {point}: {err:#}")),
        }
    }
}

async fn sigstop(
    stop_for: Duration,
    targets: Targets,
    gate: Arc<tokio::sync::Mutex<()>>,
    tally: Arc<Mutex<Tally>>,
    at: Instant,
) {
    tokio::time::sleep_until(at.into()).await;
    let fleet = &targets.fleet;
    // Not while instance 0 is being killed and started again; once it is stopped, the
    // kills leave it alone.
    let turn = gate.lock().await;
    if let Err(err) = fleet.signal_stop(0, true) {
        return note(&tally, format!("SIGSTOP instance 0: {err:#}"));
    }
    drop(turn);
    tally.lock().expect("not poisoned").stops += 1;
    tokio::time::sleep(stop_for).await;
    if let Err(err) = fleet.signal_stop(0, false) {
        return note(&tally, format!("SIGCONT instance 0: {err:#}"));
    }
    let back = Instant::now();
    match fleet.wait_ready(0, RECOVERY_LIMIT).await {
        Ok(()) => tally.lock().expect("not poisoned").stop_recovery = Some(back.elapsed()),
        Err(err) => note(&tally, format!("after SIGCONT: {err:#}")),
    }
}

async fn nats_outage(
    down_for: Duration,
    targets: Targets,
    gate: Arc<tokio::sync::Mutex<()>>,
    tally: Arc<Mutex<Tally>>,
    at: Instant,
) {
    tokio::time::sleep_until(at.into()).await;
    let _turn = gate.lock().await;
    let down = Instant::now();
    let nats = targets.nats.clone();
    let stopped = tokio::task::spawn_blocking(move || nats.lock().expect("not poisoned").stop());
    if let Err(err) = stopped.await {
        return note(&tally, format!("stop nats-server: {err}"));
    }
    tokio::time::sleep(down_for).await;
    let nats = targets.nats.clone();
    let restarted =
        tokio::task::spawn_blocking(move || nats.lock().expect("not poisoned").restart());
    if let Err(err) = restarted.await {
        return note(&tally, format!("restart nats-server: {err}"));
    }
    let down = down.elapsed();
    let recovery = recovery(&targets).await;
    record(&tally, "nats", down, recovery);
}

async fn postgres_restart(
    targets: Targets,
    gate: Arc<tokio::sync::Mutex<()>>,
    tally: Arc<Mutex<Tally>>,
    at: Instant,
) {
    tokio::time::sleep_until(at.into()).await;
    let _turn = gate.lock().await;
    let down = Instant::now();
    let postgres = targets.postgres.clone();
    match tokio::task::spawn_blocking(move || postgres.restart()).await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => return note(&tally, format!("restart PostgreSQL: {err:#}")),
        Err(err) => return note(&tally, format!("restart PostgreSQL: {err}")),
    }
    let down = down.elapsed();
    let recovery = recovery(&targets).await;
    record(&tally, "postgres", down, recovery);
}

pub(crate) fn record(
    tally: &Mutex<Tally>,
    what: &'static str,
    down: Duration,
    recovery: Result<Duration>,
) {
    let recovery = match recovery {
        Ok(took) => Some(took),
        Err(err) => {
            note(tally, format!("after the {what} outage: {err:#}"));
            None
        }
    };
    tally.lock().expect("not poisoned").outages.push(Outage {
        what,
        down,
        recovery,
    });
}

/// From now (the service is back) until every running instance answers `/readyz` with 200
/// and a launch published from now on reached the executor.
async fn recovery(targets: &Targets) -> Result<Duration> {
    recovery_of(&targets.fleet, &targets.executor).await
}

/// [`recovery`] of `fleet`, seen at `executor`.
pub(crate) async fn recovery_of(fleet: &Fleet, executor: &Executor) -> Result<Duration> {
    let back = Instant::now();
    let back_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    loop {
        let mut not_ready = Vec::new();
        for i in (0..fleet.len()).filter(|&i| !fleet.stopped(i)) {
            if !fleet.ready(i).await {
                not_ready.push(i);
            }
        }
        let publishing = executor.newest_ns() > back_ns;
        if not_ready.is_empty() && publishing {
            return Ok(back.elapsed());
        }
        if back.elapsed() > RECOVERY_LIMIT {
            return Err(anyhow!(
                "not recovered within {} s: instances not ready {not_ready:?}, a launch \
                 published since: {publishing}",
                RECOVERY_LIMIT.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// xorshift64: enough to pick instances; the seed is printed, so a run can be repeated.
struct Random(u64);

impl Random {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}
