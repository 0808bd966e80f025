//! `kairos preview EXPR --tz ZONE [-n N] [--after RFC3339] [--json] [--exclude E]...
//! [--calendar-file F]... [--roll R] [--dst-gap G] [--dst-fold F] [--start-at T] [--end-at T]
//! [--explain [--schedule-id ID --jitter-ms MS --deadline-s S]]`: offline evaluation of a spec
//! with the same core the planner uses, calendar rules included; `--explain` says for each
//! time its wall time and UTC offset, a DST gap shift or which pass of a repeated hour, a
//! roll, its jitter and its run's deadline, and which times the window removes. Offline, it knows no
//! stored schedule: skipped occurrences and pauses are not shown. Exit 2 with one line on stderr for bad input.

mod explain;

use std::process::ExitCode;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use kairos_core::{
    parse_date, parse_zone, DstFold, DstGap, Exclusion, Exclusions, NamedCalendar, Roll, Spec,
    Timetable,
};

/// Arguments of `kairos preview`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Cron expression, `@every <duration>` or `@at <RFC3339>` (quote it).
    expr: String,
    /// Print the fire times (or the explained ticks) as JSON.
    #[arg(long)]
    json: bool,
    /// IANA time zone the expression is read in.
    #[arg(long, default_value = "UTC")]
    tz: String,
    /// How many fire times to print (1 to 1000).
    #[arg(
        short = 'n',
        long = "count",
        default_value_t = 5,
        value_parser = clap::value_parser!(u16).range(1..=1000)
    )]
    count: u16,
    /// Print fire times strictly after this instant (RFC 3339); default: now.
    /// Also the anchor of `@every`.
    #[arg(long)]
    after: Option<String>,
    /// Exclude a date (`2026-12-25`), a range (`2026-12-24..2026-12-26`) or the times of a
    /// cron expression in the zone (`* * * * SAT,SUN`). Repeatable.
    #[arg(long = "exclude", value_name = "ENTRY")]
    exclude: Vec<String>,
    /// Exclude the dates of a calendar file: the body of `PUT /calendars/{name}`
    /// (`{"dates": [...], "description": ...}`). Repeatable.
    #[arg(long = "calendar-file", value_name = "FILE")]
    calendar_files: Vec<PathBuf>,
    /// Move a tick on an excluded date to the next (`forward`) or previous (`backward`) free
    /// date at the same wall time (`none`: drop it).
    #[arg(long)]
    roll: Option<String>,
    /// A wall time the clocks skip: `shift` to the jump or `skip` it.
    #[arg(long)]
    dst_gap: Option<String>,
    /// A wall time that happens twice: fire at the `first`, the `last` or `both`.
    #[arg(long)]
    dst_fold: Option<String>,
    /// Explain each time: wall time in the zone, UTC offset, DST gap shift or which pass of a
    /// repeated hour, roll, jitter; and the times the window removes.
    #[arg(long)]
    explain: bool,
    /// With `--explain`: the schedule id the jitter is computed for.
    #[arg(long, default_value = "")]
    schedule_id: String,
    /// With `--explain`: the jitter bound in milliseconds (0..=3600000).
    #[arg(long, default_value_t = 0)]
    jitter_ms: u32,
    /// With `--explain`: the schedule's `deadline_s` (1..=31536000): each time shows by when
    /// its run must be final.
    #[arg(long)]
    deadline_s: Option<u32>,
    /// Window start (RFC 3339): no time before it.
    #[arg(long)]
    start_at: Option<String>,
    /// Window end (RFC 3339): no time after it.
    #[arg(long)]
    end_at: Option<String>,
}

/// Runs the preview; exit code 2 on invalid input. `--json` prints
/// `{"fire_times": [...]}` (`{"explained": [...]}` with `--explain`) instead of one time per
/// line.
pub fn run(args: &Args) -> ExitCode {
    match fire_times(args) {
        Ok(times) => {
            print(args, args.json, &times);
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("kairos preview: {message}");
            ExitCode::from(2)
        }
    }
}

/// An RFC 3339 flag.
fn instant(flag: &str, text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|_| format!("{flag} {text:?} is not an RFC 3339 time (e.g. 2025-03-08T12:00:00Z)"))
}

fn fire_times(args: &Args) -> Result<Vec<String>, String> {
    let spec = kairos_registrar::parse_spec(&args.expr).map_err(|err| err.to_string())?;
    let zone = parse_zone(&args.tz).map_err(|err| err.to_string())?;
    let after = match &args.after {
        Some(text) => instant("--after", text)?,
        None => Utc::now(),
    };
    let start_at = args
        .start_at
        .as_deref()
        .map(|t| instant("--start-at", t))
        .transpose()?;
    let end_at = args
        .end_at
        .as_deref()
        .map(|t| instant("--end-at", t))
        .transpose()?;
    if args.jitter_ms > kairos_core::MAX_JITTER_MS {
        return Err(format!(
            "--jitter-ms {} is out of range: must be between 0 and {}",
            args.jitter_ms,
            kairos_core::MAX_JITTER_MS
        ));
    }
    let max_deadline = kairos_registrar::MAX_DEADLINE_S.unsigned_abs();
    if let Some(seconds) = args.deadline_s.filter(|s| !(1..=max_deadline).contains(s)) {
        return Err(format!(
            "--deadline-s {seconds} is out of range: must be between 1 and {max_deadline}"
        ));
    }
    let timetable = Timetable::new(spec.clone(), zone, after).window(start_at, end_at);
    let timetable = rules(args, &spec, timetable)?;
    if let Some(date) = timetable.unrollable_date(after) {
        return Err(format!(
            "--roll: the tick on {date} finds no date that is not excluded within {} days",
            kairos_core::MAX_ROLL_DAYS
        ));
    }
    let ticks = timetable.ticks_after(after).take(usize::from(args.count));
    if !args.explain {
        return Ok(ticks.map(text).collect());
    }
    let jitter = Some((args.schedule_id.as_str(), args.jitter_ms));
    let mut lines: Vec<String> = ticks
        .map(|tick| {
            let mut line = explain::line(&timetable.describe(tick, jitter));
            if let Some(seconds) = args.deadline_s {
                let deadline = tick + chrono::Duration::seconds(i64::from(seconds));
                line.push_str(&format!("  must be final by {}", text(deadline)));
            }
            line
        })
        .collect();
    lines.extend(
        timetable
            .outside_window(after, usize::from(args.count))
            .into_iter()
            .map(|o| format!("{}  outside the window ({})", text(o.at), o.side.as_str())),
    );
    Ok(lines)
}

/// An instant as RFC 3339 UTC, whole seconds.
fn text(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The timetable with the calendar rules of the flags (the same rules an upsert takes).
fn rules(args: &Args, spec: &Spec, timetable: Timetable) -> Result<Timetable, String> {
    let entries = args
        .exclude
        .iter()
        .map(|text| Exclusion::parse(text).map_err(|err| format!("--exclude {text:?}: {err}")))
        .collect::<Result<Vec<_>, _>>()?;
    let calendars = args
        .calendar_files
        .iter()
        .map(|path| calendar_file(path).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()?;
    let policy = |flag: &str, value: &Option<String>| -> Result<(), String> {
        if value.is_some() && spec.job_kind().is_none() {
            return Err(format!(
                "{flag} applies to cron specs only: @every and @at ticks are instants"
            ));
        }
        Ok(())
    };
    policy("--roll", &args.roll)?;
    policy("--dst-gap", &args.dst_gap)?;
    policy("--dst-fold", &args.dst_fold)?;
    let roll: Roll = match args.roll.as_deref() {
        Some(text) => text
            .trim()
            .parse()
            .map_err(|err| format!("--roll: {err}"))?,
        None => Roll::None,
    };
    let gap: Option<DstGap> = args
        .dst_gap
        .as_deref()
        .map(|text| {
            text.trim()
                .parse()
                .map_err(|err| format!("--dst-gap: {err}"))
        })
        .transpose()?;
    let fold: Option<DstFold> = args
        .dst_fold
        .as_deref()
        .map(|text| {
            text.trim()
                .parse()
                .map_err(|err| format!("--dst-fold: {err}"))
        })
        .transpose()?;
    Ok(timetable
        .exclude(Exclusions::new(entries, calendars))
        .roll(roll)
        .dst(gap, fold))
}

/// A calendar file: `{"dates": ["2026-12-25", ...], "description": "..."}`, named after the
/// file.
fn calendar_file(path: &Path) -> Result<NamedCalendar, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("--calendar-file {shown}: cannot read it: {err}"))?;
    let body: serde_json::Value = serde_json::from_str(&text)
        .map_err(|err| format!("--calendar-file {shown}: not JSON: {err}"))?;
    let Some(dates) = body["dates"].as_array() else {
        return Err(format!(
            "--calendar-file {shown}: needs \"dates\": an array of YYYY-MM-DD dates"
        ));
    };
    let dates = dates
        .iter()
        .map(|date| {
            let text = date.as_str().unwrap_or_default();
            parse_date(text).map_err(|err| format!("--calendar-file {shown}: {err}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let name = path.file_stem().map_or_else(
        || "calendar".to_string(),
        |stem| stem.to_string_lossy().into_owned(),
    );
    NamedCalendar::new(name, dates).map_err(|err| format!("--calendar-file {shown}: {err}"))
}

fn print(args: &Args, json: bool, times: &[String]) {
    if json {
        let key = if args.explain {
            "explained"
        } else {
            "fire_times"
        };
        let body = serde_json::json!({ key: times });
        println!("{body}");
    } else {
        for time in times {
            println!("{time}");
        }
    }
}
