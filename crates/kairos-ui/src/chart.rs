//! Small server-rendered SVG charts of a schedule's last day: outcomes per hour (stacked
//! bars) and fire drift (how long after its fire time each run was published). Drawn from
//! the runs the page already read; no script, no style attributes (the page's CSP allows
//! none), only SVG presentation attributes and classes.

use chrono::{DateTime, Duration, Utc};
use kairos_core::RunStatus;
use kairos_registrar::Run;
use maud::{html, Markup};

/// The chart's width and height in SVG units (it scales to its box).
const W: f64 = 480.0;
const H: f64 = 120.0;
/// Room for the axis labels.
const LEFT: f64 = 34.0;
const BOTTOM: f64 = 16.0;

/// How a run ended, for the bars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Success,
    Failed,
    Skipped,
}

fn outcome(status: RunStatus) -> Option<Outcome> {
    match status {
        RunStatus::Success => Some(Outcome::Success),
        RunStatus::Failed | RunStatus::TimedOut => Some(Outcome::Failed),
        RunStatus::Skipped | RunStatus::Cancelled => Some(Outcome::Skipped),
        _ => None,
    }
}

/// Per hour of the 24 before `now` (oldest first): successes, failures, skips.
fn per_hour(runs: &[Run], now: DateTime<Utc>) -> [[u32; 3]; 24] {
    let mut hours = [[0u32; 3]; 24];
    for run in runs {
        let age = now - run.run_at;
        if age < Duration::zero() || age >= Duration::hours(24) {
            continue;
        }
        let Some(outcome) = outcome(run.status) else {
            continue;
        };
        let slot = 23 - usize::try_from(age.num_hours()).unwrap_or(23).min(23);
        hours[slot][outcome as usize] += 1;
    }
    hours
}

/// The charts of the day before `now` from `runs` (newest first); `complete` is false when
/// `runs` may not reach back a whole day (the read was capped).
pub(crate) fn last_day(runs: &[Run], now: DateTime<Utc>, complete: bool) -> Markup {
    let hours = per_hour(runs, now);
    let totals = hours.iter().fold([0u32; 3], |mut sum, hour| {
        for (total, n) in sum.iter_mut().zip(hour) {
            *total += n;
        }
        sum
    });
    let drifts: Vec<(DateTime<Utc>, i64)> = runs
        .iter()
        .filter(|run| now - run.run_at < Duration::hours(24) && run.run_at <= now)
        .filter_map(|run| {
            let published = run.published_at?;
            Some((
                run.fire_at,
                (published - run.fire_at).num_milliseconds().max(0),
            ))
        })
        .collect();
    html! {
        div.charts #charts {
            figure.chart #outcomes-chart data-success=(totals[0]) data-failed=(totals[1]) data-skipped=(totals[2]) {
                figcaption {
                    "Outcomes per hour, last 24 h: "
                    span.ok { (totals[0]) " succeeded" } ", "
                    span.bad { (totals[1]) " failed" } ", "
                    span.warn { (totals[2]) " skipped or cancelled" }
                }
                (outcome_bars(&hours))
            }
            figure.chart #drift-chart data-points=(drifts.len()) {
                figcaption {
                    "Fire drift, last 24 h (publish time minus fire time): "
                    @match drifts.iter().map(|(_, ms)| *ms).max() {
                        Some(max) => { "at most " (max) " ms over " (drifts.len()) @if drifts.len() == 1 { " run" } @else { " runs" } }
                        None => { "no run published" }
                    }
                }
                (drift_dots(&drifts, now))
            }
            @if !complete {
                p.muted #charts-note { "Drawn from the newest runs read; older runs of the day are not counted." }
            }
        }
    }
}

/// One rectangle of the stacked bars.
struct Bar {
    kind: usize,
    x: f64,
    y: f64,
    width: f64,
    height: f64,
    n: u32,
    hours_ago: usize,
}

const KINDS: [(&str, &str, &str); 3] = [
    ("bar-success", "#17703a", "succeeded"),
    ("bar-failed", "#b42318", "failed"),
    ("bar-skipped", "#a15c00", "skipped or cancelled"),
];

fn bars(hours: &[[u32; 3]; 24]) -> Vec<Bar> {
    let max = hours
        .iter()
        .map(|h| h.iter().sum::<u32>())
        .max()
        .unwrap_or(0)
        .max(1);
    let plot = H - BOTTOM;
    let slot = (W - LEFT) / 24.0;
    let mut bars = Vec::new();
    for (i, hour) in hours.iter().enumerate() {
        let x = LEFT + slot * f64::from(u32::try_from(i).unwrap_or(0)) + 1.0;
        let mut top = plot;
        for (kind, n) in hour.iter().enumerate().filter(|(_, n)| **n > 0) {
            let height = plot * f64::from(*n) / f64::from(max);
            top -= height;
            bars.push(Bar {
                kind,
                x,
                y: top,
                width: slot - 2.0,
                height,
                n: *n,
                hours_ago: 24 - i,
            });
        }
    }
    bars
}

fn outcome_bars(hours: &[[u32; 3]; 24]) -> Markup {
    let max = hours
        .iter()
        .map(|h| h.iter().sum::<u32>())
        .max()
        .unwrap_or(0);
    let plot = H - BOTTOM;
    html! {
        svg viewBox=(format!("0 0 {W} {H}")) role="img" aria-label="Outcomes per hour over the last day" {
            line.axis x1=(LEFT) y1=(plot) x2=(W) y2=(plot) stroke="#b9c0cc" {}
            text.label x="0" y="10" font-size="10" fill="#5d6677" { (max) }
            text.label x="0" y=(plot) font-size="10" fill="#5d6677" { "0" }
            @for bar in bars(hours) {
                @let (class, fill, what) = KINDS[bar.kind];
                rect class=(class) x=(format!("{:.1}", bar.x)) y=(format!("{:.1}", bar.y))
                    width=(format!("{:.1}", bar.width)) height=(format!("{:.1}", bar.height)) fill=(fill) {
                    title { (bar.n) " " (what) ", hour ending " (bar.hours_ago - 1) " h ago" }
                }
            }
            text.label x=(LEFT) y=(H - 2.0) font-size="10" fill="#5d6677" { "24 h ago" }
            text.label x=(W) y=(H - 2.0) font-size="10" fill="#5d6677" text-anchor="end" { "now" }
        }
    }
}

fn drift_dots(drifts: &[(DateTime<Utc>, i64)], now: DateTime<Utc>) -> Markup {
    let max = drifts.iter().map(|(_, ms)| *ms).max().unwrap_or(0).max(1);
    let plot = H - BOTTOM;
    let day = Duration::hours(24).num_seconds() as f64;
    html! {
        svg viewBox=(format!("0 0 {W} {H}")) role="img" aria-label="Fire drift over the last day" {
            line.axis x1=(LEFT) y1=(plot) x2=(W) y2=(plot) stroke="#b9c0cc" {}
            text.label x="0" y="10" font-size="10" fill="#5d6677" { (max) " ms" }
            text.label x="0" y=(plot) font-size="10" fill="#5d6677" { "0" }
            @for (at, ms) in drifts {
                @let age = (now - *at).num_seconds() as f64;
                @let x = LEFT + (W - LEFT) * (1.0 - age / day).clamp(0.0, 1.0);
                @let y = plot - (plot - 12.0) * (*ms as f64) / (max as f64);
                circle.dot cx=(format!("{x:.1}")) cy=(format!("{y:.1}")) r="2.5" fill="#1f5fbf" {
                    title { (ms) " ms" }
                }
            }
            text.label x=(LEFT) y=(H - 2.0) font-size="10" fill="#5d6677" { "24 h ago" }
            text.label x=(W) y=(H - 2.0) font-size="10" fill="#5d6677" text-anchor="end" { "now" }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("time")
            .with_timezone(&Utc)
    }

    #[test]
    fn runs_fall_in_their_hour() {
        let now = at("2026-03-05T12:00:00Z");
        let run = |tick: &str, status: RunStatus| Run {
            idempotency_key: tick.into(),
            schedule_id: "s".into(),
            run_at: at(tick),
            fire_at: at(tick),
            status,
            source: kairos_core::RunSource::Schedule,
            workflow_id: "w".into(),
            version: 1,
            user_id: "u".into(),
            run_id: None,
            attempts: 1,
            attempt: 1,
            heartbeat_at: None,
            dead_lettered_at: None,
            reason: None,
            last_error: None,
            published_at: None,
            stream_seq: None,
            started_at: None,
            finished_at: None,
            executor_id: None,
            parent_key: None,
            created_at: at(tick),
            updated_at: at(tick),
        };
        let runs = [
            run("2026-03-05T11:30:00Z", RunStatus::Success),
            run("2026-03-05T11:10:00Z", RunStatus::Failed),
            run("2026-03-04T12:30:00Z", RunStatus::Skipped),
            run("2026-03-04T11:59:59Z", RunStatus::Success), // older than a day
            run("2026-03-05T12:00:10Z", RunStatus::Pending), // ahead, not an outcome
        ];
        let hours = per_hour(&runs, now);
        assert_eq!(hours[23], [1, 1, 0]);
        assert_eq!(hours[0], [0, 0, 1]);
        assert_eq!(hours.iter().flatten().sum::<u32>(), 3);
    }
}
