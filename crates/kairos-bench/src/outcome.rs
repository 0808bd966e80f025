//! The tick marks a run measures, waiting for them, and what the database says happened
//! at each: how many runs were written and published, and how late (`published_at` is when
//! the run's wave was let out, on the database's clock, just before its publish; the report
//! prefers the stream's own store time of each launch).

use std::time::Duration;

use anyhow::Result;
use chrono::{DateTime, DurationRound, TimeDelta, Utc};

use crate::executor::Executor;
use crate::fleet::Fleet;
use crate::loops::LoopFigures;
use crate::machine::CpuSample;
use crate::setup::Scratch;
use crate::Args;

/// One measured window: a tick mark (burst), or a run of minutes (spread).
#[derive(Debug, Clone)]
pub struct Mark {
    /// Label for the table.
    pub label: String,
    /// Ticks planned in `[from, to]`.
    pub from: DateTime<Utc>,
    /// See `from`.
    pub to: DateTime<Utc>,
    /// Runs expected.
    pub expected: usize,
    /// Runs the planner wrote for the window.
    pub rows: i64,
    /// Of those, published.
    pub published: i64,
    /// `published_at - run_at` in ms: first, p50, p99, last (the report's fallback when the
    /// bench's consumer saw no launch of the mark).
    pub publish_ms: [f64; 4],
    /// Mode `loop`: the return path.
    pub loop_figures: Option<LoopFigures>,
}

/// The windows of this run: `--marks` tick marks at least 5 s from now (burst, stored), or
/// `--marks` whole minutes starting at the next minute (spread).
fn windows(args: &Args, now: DateTime<Utc>) -> Vec<(DateTime<Utc>, DateTime<Utc>, usize)> {
    let period = TimeDelta::from_std(args.period()).expect("small period");
    let first = (now + TimeDelta::seconds(5))
        .duration_trunc(period)
        .expect("truncate")
        + period;
    (0..args.marks)
        .map(|k| {
            let from = first + period * k as i32;
            if args.spread() {
                (from, from + period - TimeDelta::seconds(1), args.schedules)
            } else {
                (from, from, args.schedules)
            }
        })
        .collect()
}

/// Waits for every window to pass and its runs to be published (or 120 s after it, at
/// most), then reads what happened; with an `executor` (mode `loop`), also waits for its
/// reports to be applied, until a second before the next window at most, and reads the
/// return path. CPU is counted from the start of the wait.
///
/// Nothing is asked of the database before a window's last tick, and after it only whether
/// a run of the window is still unpublished (one probe of the hot set's partial index), every
/// second: counting the window's rows while the burst goes out would take CPU from the
/// system under measurement on a machine that has two cores for all of it.
pub async fn await_marks(
    args: &Args,
    scratch: &Scratch,
    fleet: &mut Fleet,
    executor: Option<&Executor>,
) -> Result<Vec<Mark>> {
    let windows = windows(args, Utc::now());
    crate::leader_kill::arm(args, scratch, windows[0].0);
    fleet.baseline();
    let mut marks = Vec::new();
    for (from, to, expected) in windows {
        eprintln!("bench: waiting for ticks {from} … {to}");
        let give_up = to + TimeDelta::seconds(120);
        let (ahead, at_tick) = match executor {
            Some(_) => {
                let ahead_from = from - TimeDelta::seconds(crate::loops::AHEAD_S);
                // Counted only when the whole span is still ahead (not for a first mark the
                // run reaches late), and not for a spread minute, whose span before it is
                // the last minute's steady work.
                let count_ahead = !args.spread() && Utc::now() < ahead_from;
                sleep_until(ahead_from).await;
                let ahead = count_ahead.then(|| CpuSample::take(&fleet.instance_pids()));
                sleep_until(from).await;
                (ahead, Some(CpuSample::take(&fleet.instance_pids())))
            }
            None => (None, None),
        };
        sleep_until(to + TimeDelta::milliseconds(250)).await;
        loop {
            if !unpublished(scratch, from, to).await? {
                let (_, published) = counts(scratch, from, to).await?;
                if published as usize >= expected {
                    break;
                }
            }
            if Utc::now() > give_up {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let mut mark = read(scratch, from, to, expected).await?;
        if let Some(executor) = executor {
            let period = TimeDelta::from_std(args.period()).expect("small period");
            // A burst's reports are due before the next mark; a spread minute's last ticks
            // are reported on while the next minute already fires.
            let deadline = if args.spread() {
                to + period / 2
            } else {
                from + period - TimeDelta::seconds(1)
            };
            let window = crate::loops::Window { from, to };
            let mut figures = crate::loops::measure(scratch, executor, window, deadline).await?;
            figures.cores_ahead = ahead
                .zip(at_tick.as_ref())
                .map(|(ahead, tick)| tick.since(&ahead));
            figures.cores =
                at_tick.map(|tick| CpuSample::take(&fleet.instance_pids()).since(&tick));
            mark.loop_figures = Some(figures);
        }
        marks.push(mark);
    }
    Ok(marks)
}

async fn sleep_until(at: DateTime<Utc>) {
    if let Ok(left) = (at - Utc::now()).to_std() {
        tokio::time::sleep(left).await;
    }
}

/// Whether a run of the window is still waiting to go out (`PENDING` or `RETRYING`).
async fn unpublished(scratch: &Scratch, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<bool> {
    Ok(sqlx::query_scalar(
        "select exists (select 1 from schedule_runs \
         where status in ('PENDING', 'RETRYING') and run_at between $1 and $2)",
    )
    .bind(from)
    .bind(to)
    .fetch_one(&scratch.pool)
    .await?)
}

async fn counts(scratch: &Scratch, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<(i64, i64)> {
    Ok(sqlx::query_as(
        "select count(*), count(published_at) from schedule_runs \
         where source = 'schedule' and run_at between $1 and $2",
    )
    .bind(from)
    .bind(to)
    .fetch_one(&scratch.pool)
    .await?)
}

async fn read(
    scratch: &Scratch,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    expected: usize,
) -> Result<Mark> {
    let (rows, published) = counts(scratch, from, to).await?;
    let (first, p50, p99, last): (Option<f64>, Option<f64>, Option<f64>, Option<f64>) =
        sqlx::query_as(
            "select min(ms), percentile_cont(0.5) within group (order by ms), \
               percentile_cont(0.99) within group (order by ms), max(ms) \
             from (select extract(epoch from published_at - run_at)::float8 * 1000 as ms \
                   from schedule_runs where source = 'schedule' and run_at between $1 and $2 \
                     and published_at is not null) as l",
        )
        .bind(from)
        .bind(to)
        .fetch_one(&scratch.pool)
        .await?;
    let label = if from == to {
        from.format("%H:%M:%S").to_string()
    } else {
        format!("{}–{}", from.format("%H:%M:%S"), to.format("%H:%M:%S"))
    };
    let nan = f64::NAN;
    Ok(Mark {
        label,
        from,
        to,
        expected,
        rows,
        published,
        publish_ms: [
            first.unwrap_or(nan),
            p50.unwrap_or(nan),
            p99.unwrap_or(nan),
            last.unwrap_or(nan),
        ],
        loop_figures: None,
    })
}
