//! Mode `intake`: the status intake's capacity. `--schedules` runs are written as published
//! (`ENQUEUED`), then the bench sends `STARTED` and `SUCCESS` for every one on the status
//! subject as fast as it can publish (acknowledged by the stream per chunk), and waits
//! until every run is `SUCCESS` in the database. The rate is every report sent over the
//! time from the first publish to the last report applied (`finished_at`, the database's
//! clock): when the bench publishes faster than kairos applies, that is the intake's rate.

use std::time::{Duration, Instant};

use anyhow::Result;
use async_nats::jetstream;
use chrono::{DateTime, Utc};
use futures::future::join_all;

use crate::fleet::Usage;
use crate::limits::Limits;
use crate::setup::Scratch;
use crate::Args;

/// Runs whose reports are published before their acknowledgements are awaited: two
/// reports each, below the client's limit of 5,000 acknowledgements awaited at once (past
/// it a publish waits for an acknowledgement that nobody awaits yet).
const CHUNK: usize = 2_000;

/// What the run measured.
#[derive(Debug, Clone)]
pub struct IntakeFigures {
    /// Runs written.
    pub runs: usize,
    /// Reports sent (two per run).
    pub reports: usize,
    /// Seconds the bench took to publish every report.
    pub publish_s: f64,
    /// Seconds from the first publish to the last report applied.
    pub applied_s: f64,
    /// Runs not `SUCCESS` when the bench stopped waiting.
    pub unapplied: i64,
}

/// Writes the runs, sends the reports, waits for them to be applied (5 minutes at most).
pub async fn measure(args: &Args, scratch: &Scratch) -> Result<IntakeFigures> {
    let runs = args.schedules;
    sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
           published_at, workflow_id, version, user_id) \
         select lpad(to_hex(i), 64, '0'), 'bench-' || i, date_trunc('minute', now()), \
           date_trunc('minute', now()), 'ENQUEUED', now(), 'bench', 1, 'bench' \
         from generate_series(1, $1::int8) as i",
    )
    .bind(runs as i64)
    .execute(&scratch.pool)
    .await?;
    sqlx::query("analyze schedule_runs")
        .execute(&scratch.pool)
        .await?;
    let client = scratch.nats().await?;
    let js = jetstream::new(client);
    eprintln!("bench: sending {} reports", runs * 2);
    let started_at = Utc::now();
    let started = Instant::now();
    let keys: Vec<String> = (1..=runs).map(|i| format!("{i:064x}")).collect();
    for chunk in keys.chunks(CHUNK) {
        let mut acks = Vec::with_capacity(chunk.len() * 2);
        for key in chunk {
            for status in ["STARTED", "SUCCESS"] {
                let body = serde_json::json!({"idempotency_key": key, "status": status,
                    "executor_id": "bench-executor"});
                let payload = serde_json::to_vec(&body)?.into();
                acks.push(js.publish(format!("kairos.status.{key}"), payload).await?);
            }
        }
        for ack in join_all(acks.into_iter().map(std::future::IntoFuture::into_future)).await {
            ack?;
        }
    }
    let publish_s = started.elapsed().as_secs_f64();
    let give_up = Instant::now() + Duration::from_secs(300);
    while Instant::now() < give_up && open(scratch).await? > 0 {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let (last, unapplied): (Option<DateTime<Utc>>, i64) = sqlx::query_as(
        "select max(finished_at), count(*) filter (where status <> 'SUCCESS') \
         from schedule_runs",
    )
    .fetch_one(&scratch.pool)
    .await?;
    let applied_s = last.map_or(f64::NAN, |last| {
        (last - started_at).num_microseconds().unwrap_or(0) as f64 / 1e6
    });
    Ok(IntakeFigures {
        runs,
        reports: runs * 2,
        publish_s,
        applied_s,
        unapplied,
    })
}

/// Runs still waiting for a report.
async fn open(scratch: &Scratch) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "select count(*) from schedule_runs where status in ('ENQUEUED', 'STARTED')",
    )
    .fetch_one(&scratch.pool)
    .await?)
}

/// Prints the figures with the machine's limit beside them.
pub fn print(args: &Args, figures: &IntakeFigures, usage: &[Usage], limits: Option<&Limits>) {
    let cores = crate::machine::cores();
    println!(
        "kairos-bench intake: {} instance(s), {} runs, {} reports (STARTED + SUCCESS each); \
         machine: {cores} cores",
        args.instances, figures.runs, figures.reports
    );
    let per_s = figures.reports as f64 / figures.applied_s;
    println!(
        "sent in {:.2} s ({:.0} reports/s offered); all applied {:.2} s after the first was \
         sent: {per_s:.0} reports/s applied; {} run(s) not SUCCESS",
        figures.publish_s,
        figures.reports as f64 / figures.publish_s,
        figures.applied_s,
        figures.unapplied
    );
    for (i, u) in usage.iter().enumerate() {
        println!(
            "instance {i}: CPU {:.2} s; RSS {:.0} MiB now, {:.0} MiB high-water",
            u.cpu_s, u.rss_mib, u.rss_hwm_mib
        );
    }
    if let Some(limits) = limits {
        println!(
            "raw limit on this machine: PostgreSQL {:.0} set-based status updates/s ({} \
             sessions, batches of 2,000, no NATS): the intake applies {:.0}% of it",
            limits.pg_per_s,
            args.instances,
            100.0 * per_s / limits.pg_per_s
        );
    }
}
