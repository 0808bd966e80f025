//! Small server-rendered SVG charts of the last day: outcomes per hour (stacked bars) and
//! fire drift per hour (how long after its planned tick a scheduled run's first attempt was
//! published, the meaning of `kairos_fire_drift_seconds`: the median and the largest). One renderer ([`render`]) over a [`Day`], built from a schedule's runs
//! ([`Day::from_runs`], the schedule page) or from the store's per-hour totals across all
//! schedules ([`Day::from_totals`], the overview). No script, no style attributes (the page's
//! CSP allows none), only SVG presentation attributes and classes.

use chrono::{DateTime, Duration, Utc};
use kairos_core::{RunSource, RunStatus};
use kairos_registrar::HourTotals;
use kairos_registrar::Run;
use maud::{html, Markup};
/// The chart's width and height in SVG units (it scales to its box).
const W: f64 = 480.0;
const H: f64 = 120.0;
/// Room for the axis labels.
const LEFT: f64 = 34.0;
const BOTTOM: f64 = 16.0;

/// How a run ended, for the bars (the index into [`KINDS`] and an hour's counts).
fn kind(status: RunStatus) -> usize {
    match status {
        RunStatus::Success => 0,
        RunStatus::Failed | RunStatus::TimedOut => 1,
        RunStatus::Skipped => 2,
        RunStatus::Cancelled => 3,
        _ => 4,
    }
}

/// Publish drift of one hour's published runs, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Drift {
    p50: f64,
    max: f64,
    runs: u32,
}

/// The last day, per hour (index 0 is 23 h ago, 23 the hour up to now).
#[derive(Debug, Clone)]
pub(crate) struct Day {
    counts: [[u32; 5]; 24],
    drift: [Option<Drift>; 24],
}

/// The slot of `run_at` in the day before `now`: `None` outside (now − 24 h, now].
fn slot(run_at: DateTime<Utc>, now: DateTime<Utc>) -> Option<usize> {
    let age = now - run_at;
    if age < Duration::zero() || age >= Duration::hours(24) {
        return None;
    }
    Some(23 - usize::try_from(age.num_hours()).ok()?.min(23))
}

/// The median of sorted `values` (linear between the middle two, as `percentile_cont`).
fn median(values: &[f64]) -> f64 {
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

impl Day {
    /// From a schedule's runs (those outside the day before `now` are left out).
    pub(crate) fn from_runs(runs: &[Run], now: DateTime<Utc>) -> Day {
        let mut counts = [[0u32; 5]; 24];
        let mut drifts: Vec<Vec<f64>> = vec![Vec::new(); 24];
        for run in runs {
            let Some(i) = slot(run.run_at, now) else {
                continue;
            };
            counts[i][kind(run.status)] += 1;
            let planned = run.source == RunSource::Schedule && run.attempt == 1;
            if let (Some(published), true) = (run.published_at, planned) {
                let ms = (published - run.run_at).num_milliseconds().max(0);
                drifts[i].push(ms as f64);
            }
        }
        let mut drift = [None; 24];
        for (slot, mut values) in drift.iter_mut().zip(drifts) {
            if values.is_empty() {
                continue;
            }
            values.sort_by(f64::total_cmp);
            *slot = Some(Drift {
                p50: median(&values),
                max: values[values.len() - 1],
                runs: u32::try_from(values.len()).unwrap_or(u32::MAX),
            });
        }
        Day { counts, drift }
    }

    /// From the store's per-hour totals.
    pub(crate) fn from_totals(totals: &[HourTotals]) -> Day {
        let mut counts = [[0u32; 5]; 24];
        let mut drift = [None; 24];
        let count = |n: i64| u32::try_from(n.max(0)).unwrap_or(u32::MAX);
        for hour in totals {
            let Some(i) = usize::try_from(hour.hours_ago)
                .ok()
                .filter(|ago| *ago < 24)
                .map(|ago| 23 - ago)
            else {
                continue;
            };
            counts[i] = [
                count(hour.success),
                count(hour.failed),
                count(hour.skipped),
                count(hour.cancelled),
                count(hour.other),
            ];
            if let (Some(p50), Some(max)) = (hour.drift_p50_ms, hour.drift_max_ms) {
                drift[i] = Some(Drift {
                    p50,
                    max,
                    runs: count(hour.published),
                });
            }
        }
        Day { counts, drift }
    }
}

/// The charts of `day`; `scope` begins the captions ("Across all schedules"), `note` (if
/// any) follows the charts.
pub(crate) fn render(day: &Day, scope: Option<&str>, note: Option<Markup>) -> Markup {
    let totals = day.counts.iter().fold([0u32; 5], |mut sum, hour| {
        for (total, n) in sum.iter_mut().zip(hour) {
            *total += n;
        }
        sum
    });
    let published: u32 = day.drift.iter().flatten().map(|d| d.runs).sum();
    let max = day.drift.iter().flatten().map(|d| d.max).reduce(f64::max);
    html! {
        div.charts #charts {
            figure.chart #outcomes-chart data-success=(totals[0]) data-failed=(totals[1]) data-skipped=(totals[2]) data-cancelled=(totals[3]) data-other=(totals[4]) {
                figcaption {
                    @if let Some(scope) = scope { (scope) ", o" } @else { "O" }
                    "utcomes per hour, last 24 h: "
                    span.ok { (totals[0]) " succeeded" } ", "
                    span.bad { (totals[1]) " failed" } ", "
                    span.warn { (totals[2]) " skipped" } ", "
                    span.muted { (totals[3]) " cancelled" } ", "
                    span { (totals[4]) " pending or in flight" }
                }
                (outcome_bars(&day.counts))
            }
            figure.chart #drift-chart data-points=(published) {
                figcaption {
                    @if let Some(scope) = scope { (scope) ", f" } @else { "F" }
                    "ire drift per hour, last 24 h (publish time minus planned tick, scheduled runs' first attempts, as kairos_fire_drift_seconds; dot: largest, bar: median): "
                    @match max {
                        Some(max) => { "at most " (ms(max)) " over " (published) @if published == 1 { " tick" } @else { " ticks" } }
                        None => { "no scheduled tick published" }
                    }
                }
                (drift_marks(&day.drift))
            }
            @if let Some(note) = note { (note) }
        }
    }
}

/// Milliseconds as the charts write them (whole, or one decimal for a fractional median).
fn ms(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0} ms")
    } else {
        format!("{value:.1} ms")
    }
}

/// The charts of a schedule's day before `now` from `runs` (newest first); `complete` is
/// false when `runs` may not reach back a whole day (the read was capped).
pub(crate) fn last_day(runs: &[Run], now: DateTime<Utc>, complete: bool) -> Markup {
    let note = (!complete).then(|| {
        html! { p.muted #charts-note { "Drawn from the newest runs read; older runs of the day are not counted." } }
    });
    render(&Day::from_runs(runs, now), None, note)
}

/// The charts of the day across all schedules from the store's per-hour `totals`, computed
/// at `now` (the figures may be up to `max_age_s` old).
pub(crate) fn overview(totals: &[HourTotals], now: DateTime<Utc>, max_age_s: u64) -> Markup {
    let note = html! {
        p.muted #charts-note {
            "Computed at " time datetime=(crate::time::rfc3339(now)) { (crate::time::utc(now)) }
            " (refreshed at most every " (max_age_s) " s)."
        }
    };
    render(
        &Day::from_totals(totals),
        Some("Across all schedules"),
        Some(note),
    )
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

const KINDS: [(&str, &str, &str); 5] = [
    ("bar-success", "#17703a", "succeeded"),
    ("bar-failed", "#b42318", "failed"),
    ("bar-skipped", "#a15c00", "skipped"),
    ("bar-cancelled", "#6b7280", "cancelled"),
    ("bar-other", "#1f5fbf", "pending or in flight"),
];

fn bars(hours: &[[u32; 5]; 24]) -> Vec<Bar> {
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

fn outcome_bars(hours: &[[u32; 5]; 24]) -> Markup {
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
                rect class=(class) data-hours-ago=(bar.hours_ago - 1) data-n=(bar.n) x=(format!("{:.1}", bar.x)) y=(format!("{:.1}", bar.y))
                    width=(format!("{:.1}", bar.width)) height=(format!("{:.1}", bar.height)) fill=(fill) {
                    title { (bar.n) " " (what) ", hour ending " (bar.hours_ago - 1) " h ago" }
                }
            }
            text.label x=(LEFT) y=(H - 2.0) font-size="10" fill="#5d6677" { "24 h ago" }
            text.label x=(W) y=(H - 2.0) font-size="10" fill="#5d6677" text-anchor="end" { "now" }
        }
    }
}

/// Per hour with a published run: a dot at the largest drift and a short bar at the median.
fn drift_marks(drift: &[Option<Drift>; 24]) -> Markup {
    let max = drift
        .iter()
        .flatten()
        .map(|d| d.max)
        .fold(0.0, f64::max)
        .max(1.0);
    let plot = H - BOTTOM;
    let slot = (W - LEFT) / 24.0;
    let y = |ms: f64| plot - (plot - 12.0) * ms / max;
    html! {
        svg viewBox=(format!("0 0 {W} {H}")) role="img" aria-label="Fire drift per hour over the last day" {
            line.axis x1=(LEFT) y1=(plot) x2=(W) y2=(plot) stroke="#b9c0cc" {}
            text.label x="0" y="10" font-size="10" fill="#5d6677" { (ms(max.round())) }
            text.label x="0" y=(plot) font-size="10" fill="#5d6677" { "0" }
            @for (i, d) in drift.iter().enumerate() {
                @if let Some(d) = d {
                    @let x = LEFT + slot * (f64::from(u32::try_from(i).unwrap_or(0)) + 0.5);
                    @let what = format!("hour ending {} h ago: median {}, largest {} over {} published", 23 - i, ms(d.p50), ms(d.max), d.runs);
                    line.median data-hours-ago=(23 - i) x1=(format!("{:.1}", x - slot / 3.0)) x2=(format!("{:.1}", x + slot / 3.0))
                        y1=(format!("{:.1}", y(d.p50))) y2=(format!("{:.1}", y(d.p50))) stroke="#0b3d91" stroke-width="2" {
                        title { (what) }
                    }
                    circle.dot data-hours-ago=(23 - i) cx=(format!("{x:.1}")) cy=(format!("{:.1}", y(d.max))) r="2.5" fill="#1f5fbf" {
                        title { (what) }
                    }
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
            deadline_at: None,
            late_at: None,
            late_reason: None,
            created_at: at(tick),
            updated_at: at(tick),
            schedule_revision: None,
            launch_region: None,
        };
        let runs = [
            run("2026-03-05T11:30:00Z", RunStatus::Success),
            run("2026-03-05T11:10:00Z", RunStatus::Failed),
            run("2026-03-04T12:30:00Z", RunStatus::Skipped),
            run("2026-03-04T11:59:59Z", RunStatus::Success), // older than a day
            run("2026-03-05T12:00:10Z", RunStatus::Pending), // ahead, not an outcome
        ];
        let day = Day::from_runs(&runs, now);
        assert_eq!(day.counts[23], [1, 1, 0, 0, 0]);
        assert_eq!(day.counts[0], [0, 0, 1, 0, 0]);
        assert_eq!(day.counts.iter().flatten().sum::<u32>(), 3);
    }
}
