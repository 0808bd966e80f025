//! A schedule's spec in words ("at 07:00, on Monday to Friday"), for people reading the page.
//!
//! The sentence is made from the parsed spec (read through [`kairos_registrar::parse_spec`]),
//! never from the text: the items of each cron field (values, names as numbers, ranges,
//! steps, lists, `L`, `LW`, `nW`, `dL`, `d#n`, `d#L`, `+` before day-of-week), a nickname as
//! the expression it stands for, the parts of an `@every` duration, the instant of `@at` and
//! the parent of `@after`. A spec the parser refuses is shown as written, never refused here
//! (it was validated when it was stored).

mod days;
mod lists;
mod time_of_day;

use chrono::SecondsFormat;
use kairos_core::{ChainOn, CronExpr, CronField, EveryPart, EveryUnit, Spec};

use days::day_words;
use lists::{is_any, join, list_words};
use time_of_day::time_words;

/// The spec in words, with the zone its wall times are in.
pub fn describe(spec: &str, zone: &str) -> String {
    let written = spec.trim();
    match kairos_registrar::parse_spec(written) {
        Ok(parsed) => describe_spec(&parsed, zone)
            .unwrap_or_else(|| format!("{} (in {zone})", parsed.as_str())),
        Err(_) => format!("{written} (in {zone})"),
    }
}

/// The parsed spec in words; `None` for a kind of spec this module has no sentence for.
fn describe_spec(spec: &Spec, zone: &str) -> Option<String> {
    if let Some(chain) = spec.chain() {
        let parent = &chain.parent;
        return Some(match chain.on {
            ChainOn::Success => format!("after each run of schedule {parent} that succeeds"),
            ChainOn::Failure => {
                format!("after each run of schedule {parent} that fails for good (no attempt left)")
            }
            ChainOn::Always => format!(
                "after each run of schedule {parent} that ends (succeeds, fails for good or is \
                 cancelled)"
            ),
        });
    }
    if let Some(parts) = spec.every() {
        return Some(format!(
            "{} (counted from the start, not the wall clock)",
            every_words(parts)
        ));
    }
    if let Some(at) = spec.at() {
        return Some(format!(
            "once, at {}",
            at.to_rfc3339_opts(SecondsFormat::Secs, true)
        ));
    }
    let expr = spec.cron()?;
    Some(format!("{}, wall time in {zone}", cron_words(expr)))
}

/// `90s` → "every 90 seconds", `1h30m` → "every 1 hour and 30 minutes", `1d` → "every day".
fn every_words(parts: &[EveryPart]) -> String {
    let unit_word = |unit: EveryUnit| match unit {
        EveryUnit::Second => "second",
        EveryUnit::Minute => "minute",
        EveryUnit::Hour => "hour",
        EveryUnit::Day => "day",
    };
    match parts {
        [EveryPart { amount: 1, unit }] => format!("every {}", unit_word(*unit)),
        _ => {
            let words: Vec<String> = parts
                .iter()
                .map(|part| plural(part.amount, unit_word(part.unit)))
                .collect();
            format!("every {}", join(&words))
        }
    }
}

/// "1 hour", "30 minutes".
fn plural(amount: i64, unit: &str) -> String {
    if amount == 1 {
        format!("1 {unit}")
    } else {
        format!("{amount} {unit}s")
    }
}

/// The cron expression in words, without the zone: the time of day, then the days unless
/// every day of every hour, then the years unless any.
fn cron_words(expr: &CronExpr) -> String {
    let hour = expr.field(CronField::Hour);
    let mut sentence = time_words(
        expr.field(CronField::Second),
        expr.field(CronField::Minute),
        hour,
    );
    let days = day_words(
        expr.field(CronField::DayOfMonth),
        expr.field(CronField::DayOfWeek),
        expr.field(CronField::Month),
        expr.both_days(),
    );
    if !(days == "every day" && is_any(hour)) {
        sentence.push_str(", ");
        sentence.push_str(&days);
    }
    let year = expr.field(CronField::Year);
    if !is_any(year) {
        sentence.push_str(&format!(", in {}", list_words(year, &|v| v.to_string())));
    }
    sentence
}
