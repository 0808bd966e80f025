//! The faults of a failover run (`--ha`): every `every`, the PostgreSQL primary is killed
//! (`kill-primary`) or switched over (`switchover`), kills and switchovers alternating,
//! kills first, until `kills` and `switchovers` are done. After each, the recovery is
//! measured as after any outage: until every instance answers `/readyz` with 200 and a
//! launch published after the new primary took over reached the executor.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::executor::Executor;
use crate::faults::{note, record, recovery_of, Tally};
use crate::fleet::Fleet;
use crate::ha::Cluster;

/// The failover schedule.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Time between two failovers (and before the first).
    pub every: Duration,
    /// How many times the primary is killed.
    pub kills: usize,
    /// How many planned switchovers.
    pub switchovers: usize,
    /// Before each kill, the primary's WAL senders stop this long: an asynchronous
    /// failover's lost tail, staged.
    pub lost_tail: Option<Duration>,
}

impl Plan {
    /// How long the faults go on: one `every` per failover, and one more after the last.
    pub fn duration(&self) -> Duration {
        self.every * (self.kills + self.switchovers + 1) as u32
    }
}

/// Runs the plan to its end; the tally counts kills and lists each failover as an outage.
pub async fn run(
    plan: &Plan,
    fleet: &Arc<Fleet>,
    executor: &Arc<Executor>,
    cluster: &Arc<Cluster>,
) -> Tally {
    let tally = Mutex::new(Tally::default());
    let (mut kills, mut switchovers) = (0, 0);
    let started = Instant::now();
    while kills < plan.kills || switchovers < plan.switchovers {
        tokio::time::sleep(plan.every).await;
        let kill = kills < plan.kills && (kills <= switchovers || switchovers == plan.switchovers);
        let what = if kill { "kill-primary" } else { "switchover" };
        let down = Instant::now();
        let cluster = cluster.clone();
        let lost_tail = plan.lost_tail;
        let done = tokio::task::spawn_blocking(move || {
            if kill {
                cluster.kill_primary(lost_tail)
            } else {
                cluster.switchover()
            }
        })
        .await;
        match done {
            Ok(Ok(())) => {}
            Ok(Err(err)) => note(&tally, format!("{what}: {err:#}")),
            Err(err) => note(&tally, format!("{what}: {err}")),
        }
        if kill {
            kills += 1;
            tally.lock().expect("not poisoned").kills += 1;
        } else {
            switchovers += 1;
        }
        let took = down.elapsed();
        let recovered = recovery_of(fleet, executor).await;
        record(&tally, what, took, recovered);
    }
    // The last `every` of the window: ticks after the last failover are checked too.
    tokio::time::sleep((started + plan.duration()).saturating_duration_since(Instant::now())).await;
    tally.into_inner().expect("not poisoned")
}
