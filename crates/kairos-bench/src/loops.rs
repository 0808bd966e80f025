//! Mode `loop`: what happens after the launch. Once a mark's runs are published, waits until
//! the executor's reports are applied (every run of the mark final) or the next mark is a
//! second away, then reads: the executor's last report, when the intake applied each run's
//! last report (`finished_at`, the database's clock) against when the executor sent it,
//! reports applied per second, the status stream's backlog, the ticks `SKIPPED`, and the
//! cores each process group used from the tick until then (`machine.rs`). With `--spread` a
//! mark is a minute of ticks, and what is timed per run is timed from the run's own tick.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Result;
use async_nats::jetstream;
use chrono::{DateTime, TimeDelta, Utc};

use crate::executor::{Executor, Reported};
use crate::machine::Cores;
use crate::percentile::percentile;
use crate::received;
use crate::setup::Scratch;
use crate::Args;

/// The status stream of `kairos serve`'s default config.
const STATUS_STREAM: &str = "KAIROS_STATUS";

/// The return path of one mark.
#[derive(Debug, Clone)]
pub struct LoopFigures {
    /// Runs `SUCCESS` in the database.
    pub success: usize,
    /// Runs `SKIPPED` (overlap `skip`: a run of the schedule was still in flight).
    pub skipped: usize,
    /// Runs neither final nor skipped when measured.
    pub unfinished: usize,
    /// Attempts the executor reported `FAILED` (each retried once).
    pub failed_attempts: usize,
    /// The executor's last report, ms after the tick.
    pub last_report_ms: f64,
    /// Applied minus sent, per run, ms: p50, p99, last.
    pub lag_ms: [f64; 3],
    /// `SUCCESS` recorded (`finished_at`) minus the run's own tick, ms: p50, p99, last.
    pub success_ms: [f64; 3],
    /// The last report applied, ms after the tick.
    pub last_applied_ms: f64,
    /// Reports applied per second over the mark (sent reports / first receipt to last
    /// applied).
    pub per_s: f64,
    /// Messages waiting in the status stream when measured.
    pub backlog: u64,
    /// Cores each process group used from the tick until measured.
    pub cores: Option<Cores>,
    /// Cores each process group used in the [`AHEAD_S`] seconds before the tick: the
    /// claims and the launches recorded ahead of it (`scheduler.prestage_ms`, at most 10 s).
    pub cores_ahead: Option<Cores>,
    /// Applied − sent by when the executor received the launch.
    pub by_received: Vec<received::Bucket>,
}

/// The ticks of one mark: planned in `[from, to]`.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// The first tick.
    pub from: DateTime<Utc>,
    /// The last tick.
    pub to: DateTime<Utc>,
}

/// A run of the mark: its key, status, tick and `finished_at`.
type RunRow = (String, String, DateTime<Utc>, Option<DateTime<Utc>>);

/// Waits for the reports on `mark`'s runs to be applied, at most until `deadline`, then
/// reads them.
pub async fn measure(
    scratch: &Scratch,
    executor: &Executor,
    mark: Window,
    deadline: DateTime<Utc>,
) -> Result<LoopFigures> {
    while Utc::now() < deadline && unfinished(scratch, mark).await? {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let backlog = backlog(scratch).await?;
    let rows: Vec<RunRow> = sqlx::query_as(
        "select idempotency_key, status, run_at, finished_at from schedule_runs \
         where source = 'schedule' and run_at between $1 and $2",
    )
    .bind(mark.from)
    .bind(mark.to)
    .fetch_all(&scratch.pool)
    .await?;
    let mut last_attempt: HashMap<String, Reported> = HashMap::new();
    let mut reports = 0usize;
    let mut failed_attempts = 0usize;
    let mut first_received: Option<DateTime<Utc>> = None;
    for run in executor.reported() {
        let received = &run.received;
        if received.scheduled_for < mark.from || received.scheduled_for > mark.to {
            continue;
        }
        reports += run.reports;
        failed_attempts += usize::from(run.failed);
        first_received = Some(first_received.map_or(received.at, |at| at.min(received.at)));
        let newer = last_attempt
            .get(&received.key)
            .is_none_or(|seen| seen.received.attempt < received.attempt);
        if newer {
            last_attempt.insert(received.key.clone(), run);
        }
    }
    let tick = mark.from;
    let ms = |delta: TimeDelta| delta.num_microseconds().unwrap_or(0) as f64 / 1000.0;
    let mut lags = Vec::new();
    let mut success_after = Vec::new();
    let mut samples = Vec::new();
    let (mut success, mut skipped, mut unfinished) = (0, 0, 0);
    let mut last_applied: Option<DateTime<Utc>> = None;
    for (key, status, run_at, finished_at) in &rows {
        match status.as_str() {
            "SUCCESS" => {
                success += 1;
                if let Some(finished_at) = finished_at {
                    success_after.push(ms(*finished_at - *run_at));
                }
            }
            "SKIPPED" => skipped += 1,
            "FAILED" | "TIMED_OUT" | "CANCELLED" => {}
            _ => unfinished += 1,
        }
        let (Some(finished_at), Some(sent)) = (finished_at, last_attempt.get(key)) else {
            continue;
        };
        lags.push(ms(*finished_at - sent.last_report_at));
        samples.push(received::Sample {
            received_ms: ms(sent.received.at - sent.received.scheduled_for),
            lag_ms: ms(*finished_at - sent.last_report_at),
            applied_ms: ms(*finished_at - *run_at),
        });
        last_applied = Some(last_applied.map_or(*finished_at, |at| at.max(*finished_at)));
    }
    lags.sort_by(f64::total_cmp);
    success_after.sort_by(f64::total_cmp);
    let last_report = last_attempt.values().map(|r| r.last_report_at).max();
    let nan = f64::NAN;
    let per_s = match (first_received, last_applied) {
        (Some(first), Some(last)) if last > first => reports as f64 / (ms(last - first) / 1000.0),
        _ => nan,
    };
    Ok(LoopFigures {
        success,
        skipped,
        unfinished,
        failed_attempts,
        last_report_ms: last_report.map_or(nan, |at| ms(at - tick)),
        lag_ms: [
            percentile(&lags, 0.50),
            percentile(&lags, 0.99),
            lags.last().copied().unwrap_or(nan),
        ],
        success_ms: [
            percentile(&success_after, 0.50),
            percentile(&success_after, 0.99),
            success_after.last().copied().unwrap_or(nan),
        ],
        last_applied_ms: last_applied.map_or(nan, |at| ms(at - tick)),
        per_s,
        backlog,
        cores: None,
        cores_ahead: None,
        by_received: received::buckets(&samples),
    })
}

/// Whether a run of the mark still waits for a report (or for its launch).
async fn unfinished(scratch: &Scratch, mark: Window) -> Result<bool> {
    Ok(sqlx::query_scalar(
        "select exists (select 1 from schedule_runs \
         where status in ('PENDING', 'ENQUEUED', 'STARTED', 'RETRYING') \
           and run_at between $1 and $2)",
    )
    .bind(mark.from)
    .bind(mark.to)
    .fetch_one(&scratch.pool)
    .await?)
}

/// Status messages not yet acknowledged by kairos.
async fn backlog(scratch: &Scratch) -> Result<u64> {
    let client = scratch.nats().await?;
    let mut stream = jetstream::new(client).get_stream(STATUS_STREAM).await?;
    Ok(stream.info().await?.state.messages)
}

/// The status batches of every instance, from their `/metrics`: batches, reports and
/// seconds in them (summed over the instances).
#[derive(Debug, Clone, Copy, Default)]
pub struct Batches {
    /// Batches recorded.
    pub count: f64,
    /// Reports in them.
    pub reports: f64,
    /// Seconds they took (lock, decide, write, commit).
    pub seconds: f64,
    /// Times a report was put off because another transaction held its run.
    pub held: f64,
}

/// Reads [`Batches`] from the instances at `urls`.
pub async fn batches(urls: &[String]) -> Batches {
    let client = reqwest::Client::new();
    let mut total = Batches::default();
    for url in urls {
        let Ok(answer) = client.get(format!("{url}/metrics")).send().await else {
            continue;
        };
        let Ok(text) = answer.text().await else {
            continue;
        };
        let value = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(name)?.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        total.count += value("kairos_status_batch_reports_count ");
        total.reports += value("kairos_status_batch_reports_sum ");
        total.seconds += value("kairos_status_batch_duration_seconds_sum ");
        total.held += value("kairos_status_reports_held_total ");
    }
    total
}

/// Prints what the instances' status batches were like.
pub fn print_batches(batches: Batches) {
    if batches.count > 0.0 {
        println!(
            "status batches over the run, all instances: {:.0} batches, {:.0} reports per \
             batch, {:.1} ms per batch, {:.0} reports/s while a batch was being written; \
             reports put off because their run was held: {:.0}",
            batches.count,
            batches.reports / batches.count,
            1000.0 * batches.seconds / batches.count,
            batches.reports / batches.seconds,
            batches.held
        );
    }
}

/// Seconds before each tick whose CPU is counted apart: at least the longest
/// `scheduler.prestage_ms`, so a mark's work done ahead of its tick is counted too.
pub const AHEAD_S: i64 = 10;

/// Prints where the machine's cores went in each mark, beside how many it has: from the
/// tick, and with the [`AHEAD_S`] seconds before it.
fn print_cores(marks: &[(&str, &LoopFigures)]) {
    let machine = crate::machine::cores();
    for (label, l) in marks {
        let Some(cores) = &l.cores else { continue };
        let groups: Vec<String> = cores
            .groups
            .iter()
            .map(|(group, used)| format!("{group} {used:.2}"))
            .collect();
        let from_tick = cores.total() * cores.over_s;
        println!(
            "{label} cores used from the tick until measured ({:.1} s): {}; all {:.2} of \
             the machine's {machine} ({from_tick:.1} core-s)",
            cores.over_s,
            groups.join(", "),
            cores.total(),
        );
        if let Some(ahead) = &l.cores_ahead {
            let before = ahead.total() * ahead.over_s;
            println!(
                "{label} with the {:.1} s before the tick (its claims and launches recorded \
                 ahead, and whatever else ran then): {before:.1} + {from_tick:.1} = {:.1} core-s",
                ahead.over_s,
                before + from_tick
            );
        }
    }
}

/// Prints the return path's table.
pub fn print(args: &Args, marks: &[(&str, &LoopFigures)], pg_per_s: Option<f64>, batches: Batches) {
    println!(
        "return path ({} heartbeat(s) per run, {:.1}% of first attempts FAILED, overlap {}):",
        args.heartbeats,
        args.fail_share * 100.0,
        args.overlap
    );
    println!(
        "{:<19} {:>8} {:>8} {:>6} {:>7} | last report ms | applied - sent ms: {:>6} {:>6} {:>7} | last applied ms | reports/s | backlog",
        "ticks", "success", "skipped", "open", "failed", "p50", "p99", "last"
    );
    let mut rates = Vec::new();
    for (label, l) in marks {
        let [p50, p99, last] = l.lag_ms;
        println!(
            "{:<19} {:>8} {:>8} {:>6} {:>7} | {:>14.0} |                    {p50:>6.0} {p99:>6.0} {last:>7.0} | {:>15.0} | {:>9.0} | {:>7}",
            label, l.success, l.skipped, l.unfinished, l.failed_attempts, l.last_report_ms, l.last_applied_ms,
            l.per_s, l.backlog
        );
        if l.per_s.is_finite() {
            rates.push(l.per_s);
        }
    }
    for (label, l) in marks {
        let [p50, p99, last] = l.success_ms;
        println!(
            "{label} SUCCESS recorded after each run's own tick: p50 {p50:.0} ms, p99 {p99:.0} ms, \
             last {last:.0} ms"
        );
    }
    print_cores(marks);
    let buckets: Vec<(&str, &[received::Bucket])> = marks
        .iter()
        .map(|(label, l)| (*label, l.by_received.as_slice()))
        .collect();
    received::print(&buckets);
    print_batches(batches);
    if let (Some(limit), false) = (pg_per_s, rates.is_empty()) {
        let mean = rates.iter().sum::<f64>() / rates.len() as f64;
        println!(
            "kairos status intake {mean:.0} reports/s (mean over the marks) = {:.0}% of the raw \
             PostgreSQL limit ({limit:.0} set-based status updates/s)",
            100.0 * mean / limit
        );
    }
}
