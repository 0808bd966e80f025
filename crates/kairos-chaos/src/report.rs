//! The run's result: the problems found (one line each, with keys), then ONE line of
//! figures, and whether the run passed.

use std::time::Duration;

use crate::check::Findings;
use crate::faults::Tally;

/// Everything the figures line needs besides the checks and the faults.
#[derive(Debug, Clone)]
pub struct Run {
    /// Schedules registered.
    pub schedules: usize,
    /// How long faults went on.
    pub duration: Duration,
    /// How long the settle took.
    pub settle: Duration,
    /// Launch messages the executor received (distinct stream sequences).
    pub received: usize,
    /// Status reports sent again (NATS down).
    pub report_retries: i64,
    /// The kill choices' seed.
    pub seed: u64,
}

/// Prints the problems and the figures; returns whether the run passed.
pub fn print(run: &Run, findings: &Findings, tally: &Tally) -> bool {
    for problem in &findings.problems {
        println!("chaos: PROBLEM {problem}");
    }
    for failure in &tally.failures {
        println!("chaos: FAULT FAILED {failure}");
    }
    let recovered = tally.failures.is_empty() && tally.outages.iter().all(|o| o.recovery.is_some());
    let max_recovery = tally
        .outages
        .iter()
        .filter_map(|o| o.recovery)
        .max()
        .unwrap_or_default();
    let outages: Vec<String> = tally
        .outages
        .iter()
        .map(|o| {
            format!(
                "{} down {:.1}s recovered {}",
                o.what,
                o.down.as_secs_f64(),
                o.recovery
                    .map_or("never".to_string(), |r| format!("{:.1}s", r.as_secs_f64()))
            )
        })
        .collect();
    let passed = findings.lost == 0
        && findings.doubled == 0
        && findings.stuck == 0
        && findings.misreported == 0
        && recovered;
    println!(
        "chaos: {} | ticks checked {} ({} schedules x {} s of faults) | kills {} | intake kills {} | stops {} \
         (back in {}) | outages {} ({}) | lost {} | doubled {} (run twice {}) | stuck {} | reports lost {} | max recovery \
         {:.1}s | launches received {} in a stream of {} | runs re-published {} (new id after a \
         stream loss {}) | not SUCCESS [{}] \
         | status re-sends {} | settle {:.1}s | seed {}",
        if passed { "PASS" } else { "FAIL" },
        findings.ticks,
        run.schedules,
        run.duration.as_secs(),
        tally.kills,
        tally.intake_kills,
        tally.stops,
        tally
            .stop_recovery
            .map_or("never".to_string(), |r| format!("{:.1}s", r.as_secs_f64())),
        tally.outages.len(),
        outages.join(", "),
        findings.lost,
        findings.doubled,
        findings.executed_twice,
        findings.stuck,
        findings.misreported,
        max_recovery.as_secs_f64(),
        run.received,
        findings.stream_messages,
        findings.republished_runs,
        findings.redelivered,
        findings.not_success.join(" "),
        run.report_retries,
        run.settle.as_secs_f64(),
        run.seed,
    );
    passed
}
