//! The time of day of a cron spec in words: "at 07:00", "every 5 minutes between 09:00 and
//! 17:59", "every 5 seconds".

use kairos_core::{CronField, CronItem};

use super::lists::{is_any, is_even, join, list_words, ordinal, plain};

/// At most this many times are listed one by one ("at 09:00, 12:00 and 17:30").
const MAX_LISTED_TIMES: usize = 8;

/// The time of day of the second, minute and hour fields.
pub(super) fn time_words(second: &[CronItem], minute: &[CronItem], hour: &[CronItem]) -> String {
    let seconds = plain(second);
    let with_seconds = |s: u32| (seconds.as_deref() != Some(&[0])).then_some(s);
    // Only fixed values: list the times.
    if let (Some(ss), Some(ms), Some(hs)) = (&seconds, plain(minute), plain(hour)) {
        if ss.len() * ms.len() * hs.len() <= MAX_LISTED_TIMES {
            let mut times = Vec::new();
            for h in ascending(&hs) {
                for m in ascending(&ms) {
                    for s in ascending(ss) {
                        times.push(clock(h, m, with_seconds(s)));
                    }
                }
            }
            return format!("at {}", join(&times));
        }
    }
    // One second of one minute, hours by a pattern: "every 2 hours from 00:30 to 22:30".
    if let (Some([s]), Some([m])) = (seconds.as_deref(), plain(minute).as_deref()) {
        let at = |h: u32| clock(h, *m, with_seconds(*s));
        match hour {
            [CronItem::Any] => {
                return match with_seconds(*s) {
                    Some(s) => format!("at second {s} of minute {m} of every hour"),
                    None => format!("at minute {m} of every hour"),
                }
            }
            [CronItem::Range(a, b)] => {
                return format!("every hour from {} to {}", at(*a), at(*b));
            }
            [CronItem::Step(range, step)] => {
                let (a, b) = range.unwrap_or(CronField::Hour.bounds());
                let last = a + (b - a) / step * step;
                return format!("every {step} hours from {} to {}", at(a), at(last));
            }
            _ => {}
        }
    }
    let mut parts = Vec::new();
    if seconds.as_deref() != Some(&[0]) {
        parts.push(lead(second, "second"));
        if !is_any(minute) {
            parts.push(qualifier(minute, "minute"));
        } else if !is_even(second) {
            parts.push("of every minute".to_string());
        }
    } else {
        parts.push(lead(minute, "minute"));
    }
    let finest_even = if seconds.as_deref() == Some(&[0]) {
        is_even(minute)
    } else {
        is_any(minute)
    };
    match hour {
        [CronItem::Any] if finest_even => {}
        [CronItem::Any] => parts.push("of every hour".to_string()),
        _ => parts.push(hour_words(hour)),
    }
    parts.join(" ")
}

/// The values sorted, each once.
fn ascending(values: &[u32]) -> Vec<u32> {
    let mut values = values.to_vec();
    values.sort_unstable();
    values.dedup();
    values
}

/// "07:00", or "07:00:15" with a second.
fn clock(hour: u32, minute: u32, second: Option<u32>) -> String {
    match second {
        Some(second) => format!("{hour:02}:{minute:02}:{second:02}"),
        None => format!("{hour:02}:{minute:02}"),
    }
}

/// The finest restricted time field: "every 5 minutes", "at minutes 0 and 30".
fn lead(items: &[CronItem], unit: &str) -> String {
    match items {
        [CronItem::Any] => format!("every {unit}"),
        [CronItem::Step(None, n)] => format!("every {n} {unit}s"),
        [CronItem::Range(a, b)] => format!("every {unit} from {unit} {a} to {b}"),
        [CronItem::Step(Some((a, b)), n)] => {
            format!("every {n} {unit}s from {unit} {a} to {b}")
        }
        [CronItem::Value(v)] => format!("at {unit} {v}"),
        _ => format!("at {unit}s {}", list_words(items, &|v| v.to_string())),
    }
}

/// A coarser field after a finer one: "of minute 30", "of every 5th minute".
fn qualifier(items: &[CronItem], unit: &str) -> String {
    match items {
        [CronItem::Any] => format!("of every {unit}"),
        [CronItem::Step(None, n)] => format!("of every {} {unit}", ordinal(*n)),
        [CronItem::Value(v)] => format!("of {unit} {v}"),
        _ => format!("of {unit}s {}", list_words(items, &|v| v.to_string())),
    }
}

/// The hours as a scope: "between 09:00 and 17:59", "in every 2nd hour".
fn hour_words(items: &[CronItem]) -> String {
    match items {
        [CronItem::Value(h)] => format!("between {h:02}:00 and {h:02}:59"),
        [CronItem::Range(a, b)] => format!("between {a:02}:00 and {b:02}:59"),
        [CronItem::Step(None, n)] => format!("in every {} hour", ordinal(*n)),
        [CronItem::Step(Some((a, b)), n)] => {
            format!(
                "in every {} hour between {a:02}:00 and {b:02}:59",
                ordinal(*n)
            )
        }
        _ => format!("in hours {}", list_words(items, &|v| format!("{v:02}:00"))),
    }
}
