//! The `status` role of `kairos serve`: the durable consumers of the status stream feeding
//! the worker's run intake. Unpartitioned (`nats.status_partitions = 0`), every instance
//! reads every report through one shared consumer. Partitioned, every instance reads the
//! reports on `<prefix>.status.<key>` (those no server mapping moved onto a partition), and
//! the partitions it holds a lease on (`kairos_store::status_partitions`), renewed every
//! [`RENEW_EVERY`]: a partition starts being read when its lease is taken and stops when it
//! is given back.

use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use kairos_launcher::status::{Lane, StatusConsumer};
use kairos_launcher::{NatsLauncher, NatsLink};
use kairos_store::{status_partitions, PgPool};
use kairos_worker::intake::Intake;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::nats_roles::connected;

/// How often a member renews its membership and its leases.
pub const RENEW_EVERY: Duration = Duration::from_secs(2);
/// How long a membership or a lease lasts unrenewed: a partition of an instance that died
/// is read again by another within this time.
pub const LEASE: Duration = Duration::from_secs(10);

/// The `status` role: waits for NATS, then feeds the status messages of this instance's
/// lanes to the intake until `stopped`.
///
/// # Errors
/// When the status stream is misconfigured (taken by other subjects, replicas refused).
pub async fn run_status(
    link: NatsLink,
    intake: Intake,
    pool: PgPool,
    partitions: u16,
    stopped: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    tokio::pin!(stopped);
    let Some(launcher) = connected(&link, &mut stopped).await else {
        return Ok(());
    };
    tracing::info!(stream = %launcher.config().status_stream, partitions, "status intake started");
    if partitions == 0 {
        consume(launcher, Lane::All, intake, stopped).await?;
    } else {
        run_partitioned(launcher, intake, pool, partitions, stopped).await?;
    }
    tracing::info!("status intake stopped");
    Ok(())
}

/// Reads `lane` into the intake until `stopped`, connecting its consumer first (retrying
/// while the stream is not ready).
async fn consume(
    launcher: NatsLauncher,
    lane: Lane,
    intake: Intake,
    stopped: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    tokio::pin!(stopped);
    let mut pause = Duration::from_millis(200);
    let consumer = loop {
        match StatusConsumer::connect(&launcher, lane).await {
            Ok(consumer) => break consumer,
            Err(err) if err.is_misconfiguration() => {
                return Err(err).context("status stream");
            }
            Err(err) => {
                tracing::warn!(error = %err, ?lane, "status stream not ready; retrying");
                tokio::select! {
                    () = &mut stopped => return Ok(()),
                    () = tokio::time::sleep(pause) => pause = (pause * 2).min(Duration::from_secs(5)),
                }
            }
        }
    };
    let intake = &intake;
    consumer
        .run(|messages| intake.take_messages(messages), stopped)
        .await
        .context("status consumer")?;
    Ok(())
}

/// A lane being read: how to stop it, and its task.
struct Reading {
    stop: oneshot::Sender<()>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Reading {
    fn start(launcher: &NatsLauncher, lane: Lane, intake: &Intake) -> Reading {
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(consume(launcher.clone(), lane, intake.clone(), async {
            let _ = stopped.await;
        }));
        Reading { stop, task }
    }

    /// Stops reading. Messages being handled at that moment are not acknowledged: the
    /// stream delivers them again after its acknowledgement wait, and a report applied twice
    /// changes nothing the second time.
    async fn stop(self) -> anyhow::Result<()> {
        let _ = self.stop.send(());
        self.task.await.context("status lane task")?
    }
}

async fn run_partitioned(
    launcher: NatsLauncher,
    intake: Intake,
    pool: PgPool,
    partitions: u16,
    stopped: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    tokio::pin!(stopped);
    let member = member_name();
    let direct = Reading::start(&launcher, Lane::Direct, &intake);
    let mut held: HashMap<u16, Reading> = HashMap::new();
    let mut renew = tokio::time::interval(RENEW_EVERY);
    let result = loop {
        tokio::select! {
            () = &mut stopped => break Ok(()),
            _ = renew.tick() => {}
        }
        let now_held = match status_partitions::keep(&pool, &member, partitions, LEASE).await {
            Ok(now_held) => now_held,
            Err(err) => {
                // The leases run out unrenewed and others take them over; reading on meanwhile
                // does no harm (the intake locks every run it writes).
                tracing::warn!(error = %err, "status partitions: cannot renew the leases");
                continue;
            }
        };
        let given_back: Vec<u16> = held
            .keys()
            .copied()
            .filter(|p| !now_held.contains(p))
            .collect();
        for partition in given_back {
            if let Some(reading) = held.remove(&partition) {
                tracing::info!(partition, "status partition given back");
                if let Err(err) = reading.stop().await {
                    tracing::warn!(error = %err, partition, "status partition consumer");
                }
            }
        }
        for partition in now_held {
            held.entry(partition).or_insert_with(|| {
                tracing::info!(partition, "status partition taken");
                Reading::start(&launcher, Lane::Partition(partition), &intake)
            });
        }
        // A consumer ends on its own only when the stream is misconfigured: stop the role.
        let ended = held
            .iter()
            .find(|(_, reading)| reading.task.is_finished())
            .map(|(partition, _)| *partition);
        if let Some(reading) = ended.and_then(|partition| held.remove(&partition)) {
            break reading
                .stop()
                .await
                .and_then(|()| Err(anyhow::anyhow!("a status partition's consumer stopped")));
        }
        if direct.task.is_finished() {
            break Err(anyhow::anyhow!(
                "the status consumer of unpartitioned reports stopped"
            ));
        }
    };
    for (_, reading) in held.drain() {
        if let Err(err) = reading.stop().await {
            tracing::warn!(error = %err, "status partition consumer");
        }
    }
    direct.stop().await?;
    if let Err(err) = status_partitions::leave(&pool, &member).await {
        tracing::warn!(error = %err, "status partitions: cannot give the leases back");
    }
    result
}

/// This process's name among the members: host, process id and start time.
fn member_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|_| "kairos".to_string());
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    format!("{host}-{}-{started:x}", std::process::id())
}
