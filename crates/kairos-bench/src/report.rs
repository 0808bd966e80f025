//! The one table a bench run prints, with the machine's own limits beside kairos's figures.

use std::collections::HashSet;

use crate::consume::Received;
use crate::deploy::Deploy;
use crate::fleet::Usage;
use crate::limits::Limits;
use crate::outcome::Mark;
use crate::percentile::percentile;
use crate::{Args, Mode};

/// Stream- and consumer-side figures of one window.
struct Delivered {
    /// When the stream stored each launch, ms after its tick: first, p50, p99, last.
    stored_ms: [f64; 4],
    p50_ms: f64,
    p99_ms: f64,
    duplicates: usize,
    unseen: usize,
}

fn delivered(mark: &Mark, received: &[Received]) -> Delivered {
    let mine: Vec<&Received> = received
        .iter()
        .filter(|r| r.scheduled_for >= mark.from && r.scheduled_for <= mark.to)
        .collect();
    let mut lags: Vec<f64> = mine
        .iter()
        .map(|r| (r.at - r.scheduled_for).num_microseconds().unwrap_or(0) as f64 / 1000.0)
        .collect();
    lags.sort_by(f64::total_cmp);
    let mut stored: Vec<f64> = mine
        .iter()
        .map(|r| (r.stored - r.scheduled_for).num_microseconds().unwrap_or(0) as f64 / 1000.0)
        .collect();
    stored.sort_by(f64::total_cmp);
    let ends = |pick: fn(&[f64]) -> Option<&f64>| pick(&stored).copied().unwrap_or(f64::NAN);
    let attempts: HashSet<(&str, u64)> = mine.iter().map(|r| (r.key.as_str(), r.attempt)).collect();
    let keys: HashSet<&str> = mine.iter().map(|r| r.key.as_str()).collect();
    Delivered {
        stored_ms: [
            ends(<[f64]>::first),
            percentile(&stored, 0.50),
            percentile(&stored, 0.99),
            ends(<[f64]>::last),
        ],
        p50_ms: percentile(&lags, 0.50),
        p99_ms: percentile(&lags, 0.99),
        duplicates: mine.len() - attempts.len(),
        unseen: mark.expected.saturating_sub(keys.len()),
    }
}

/// Prints the run's table. Returns the ticks that were missing (no row, or never
/// published) or duplicated (rows, or a message received twice), summed over the marks.
/// `unseen` (published, but not received by the bench's consumer before it stopped) is
/// shown, not counted: the stream's own count is checked against the database instead.
pub fn print(
    args: &Args,
    deploy: &Deploy,
    marks: &[Mark],
    received: &[Received],
    usage: &[Usage],
    limits: Option<&Limits>,
) -> usize {
    let cores = crate::machine::cores();
    println!(
        "kairos-bench {:?}: {} instance(s), {} schedules{}, {} mark(s); machine: {cores} cores, {:.1} GiB",
        args.mode,
        args.instances,
        args.schedules,
        if args.mode == Mode::Stored {
            format!(" (+{} stored, not due)", args.stored)
        } else {
            String::new()
        },
        marks.len(),
        mem_total_gib(),
    );
    println!(
        "deploy sync of {} schedules (10,000 per workflow): {:.2} s; highest instance RSS high-water after it: {:.0} MiB",
        args.schedules,
        deploy.elapsed.as_secs_f64(),
        deploy.rss_hwm_mib
    );
    println!(
        "{:<19} {:>8} {:>9} | publish ms: {:>7} {:>7} {:>7} {:>7} | consumer ms: {:>7} {:>7} | {:>4} {:>7} {:>6}",
        "ticks", "runs", "published", "first", "p50", "p99", "last", "p50", "p99", "dup", "missing", "unseen"
    );
    let mut rates = Vec::new();
    let mut faults = 0;
    for mark in marks {
        let d = delivered(mark, received);
        let rows = usize::try_from(mark.rows).unwrap_or(0);
        let published = usize::try_from(mark.published).unwrap_or(0);
        let missing = mark.expected.saturating_sub(published);
        faults += d.duplicates + missing + rows.abs_diff(mark.expected);
        // The publish side as the stream saw it (its store time of each launch): the
        // database's `published_at` of a wave is when the wave was let out, not each PubAck.
        let [first, p50, p99, last] = if d.stored_ms[3].is_nan() {
            mark.publish_ms
        } else {
            d.stored_ms
        };
        println!(
            "{:<19} {:>8} {:>9} |             {first:>7.0} {p50:>7.0} {p99:>7.0} {last:>7.0} |              {:>7.0} {:>7.0} | {:>4} {:>7} {:>6}",
            mark.label, mark.rows, mark.published, d.p50_ms, d.p99_ms, d.duplicates, missing, d.unseen
        );
        if !args.spread() && last > 0.0 {
            rates.push(mark.published as f64 / (last / 1000.0));
        }
    }
    for (i, u) in usage.iter().enumerate() {
        println!(
            "instance {i}: CPU {:.2} s over the marks; RSS {:.0} MiB now, {:.0} MiB high-water",
            u.cpu_s, u.rss_mib, u.rss_hwm_mib
        );
    }
    let Some(limits) = limits else { return faults };
    println!(
        "raw limits on this machine: JetStream {:.0} msg/s (pipelined, Nats-Msg-Id, no PostgreSQL); \
         PostgreSQL {:.0} status updates/s ({} sessions, batches of 2,000, no NATS)",
        limits.nats_per_s, limits.pg_per_s, args.instances
    );
    if !rates.is_empty() {
        let kairos = rates.iter().sum::<f64>() / rates.len() as f64;
        let floor = limits.nats_per_s.min(limits.pg_per_s);
        println!(
            "kairos burst throughput {kairos:.0} runs/s (published / last publish after the tick) \
             = {:.0}% of the lower raw limit ({floor:.0}/s)",
            100.0 * kairos / floor
        );
    }
    faults
}

/// `MemTotal` of `/proc/meminfo` in GiB.
fn mem_total_gib() -> f64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|kib| kib.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0)
}
