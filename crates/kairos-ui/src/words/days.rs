//! The days of a cron spec in words: "every day", "on Monday to Friday", "on the last day of
//! the month", "on the 1st of January to June".

use chrono::Month;
use kairos_core::{weekday_name, CronField, CronItem};

use super::lists::{expand, is_any, join, ordinal};

/// "first" to "fifth", for `d#n`.
const NTH: [&str; 5] = ["first", "second", "third", "fourth", "fifth"];

/// The days the day-of-month, month and day-of-week fields select; `both_days` when a day
/// must match both day fields (`+` before day-of-week).
pub(super) fn day_words(
    dom: &[CronItem],
    dow: &[CronItem],
    month: &[CronItem],
    both_days: bool,
) -> String {
    let months = (!is_any(month)).then(|| month_words(month));
    let of_months = |text: String| match &months {
        Some(months) => format!("{text} of {months}"),
        None => format!("{text} of the month"),
    };
    let in_months = |text: String| match &months {
        Some(months) => format!("{text} in {months}"),
        None => text,
    };
    match (is_any(dom), is_any(dow)) {
        (true, true) => in_months("every day".to_string()),
        (false, true) => format!("on {}", of_months(dom_words(dom))),
        (true, false) => {
            let (days, specials) = dow_words(dow);
            match (days, specials) {
                (Some(days), None) => in_months(format!("on {days}")),
                (None, Some(specials)) => format!("on {}", of_months(specials)),
                (Some(days), Some(specials)) => {
                    format!("on {days} and on {}", of_months(specials))
                }
                (None, None) => in_months("every day".to_string()),
            }
        }
        (false, false) => {
            let (days, specials) = dow_words(dow);
            let weekdays = match (days, specials) {
                (Some(days), None) => days,
                (None, Some(specials)) => format!("{specials} of the month"),
                (Some(days), Some(specials)) => {
                    format!("{days} or the {specials} of the month")
                }
                (None, None) => "any day".to_string(),
            };
            let dom = format!("{} of the month", dom_words(dom));
            let text = if both_days {
                format!("on {dom} if it is also {}", with_article(&weekdays))
            } else {
                format!("on {dom} or on {weekdays}")
            };
            in_months(text)
        }
    }
}

/// "a Monday" for a plain weekday list; a phrase that starts with "the" as it is.
fn with_article(weekdays: &str) -> String {
    if weekdays.starts_with("the ") {
        weekdays.to_string()
    } else {
        format!("a {weekdays}")
    }
}

/// Day-of-month items: "the 1st and the 15th", "the weekday nearest the 15th".
fn dom_words(items: &[CronItem]) -> String {
    let words: Vec<String> = items
        .iter()
        .map(|item| match *item {
            CronItem::Value(d) => format!("the {}", ordinal(d)),
            CronItem::Range(a, b) => format!("the {} to the {}", ordinal(a), ordinal(b)),
            CronItem::Step(None, n) => format!("every {} day", ordinal(n)),
            CronItem::Step(Some((a, b)), n) => format!(
                "every {} day from the {} to the {}",
                ordinal(n),
                ordinal(a),
                ordinal(b)
            ),
            CronItem::LastDay => "the last day".to_string(),
            CronItem::LastWeekday => "the last weekday".to_string(),
            CronItem::NearestWeekday(d) => format!("the weekday nearest the {}", ordinal(d)),
            _ => "every day".to_string(),
        })
        .collect();
    join(&words)
}

/// The weekday's name; 0 and 7 are Sunday.
fn day_name(day: u32) -> &'static str {
    weekday_name(day).unwrap_or_default()
}

/// Day-of-week items: the plain days ("Monday to Friday") and the days of the month they
/// name ("the second Monday", "the last Friday"), either possibly absent.
fn dow_words(items: &[CronItem]) -> (Option<String>, Option<String>) {
    let plain: Vec<CronItem> = items
        .iter()
        .copied()
        .filter(|item| !matches!(item, CronItem::LastOf(_) | CronItem::Nth(..)))
        .collect();
    let specials: Vec<String> = items
        .iter()
        .filter_map(|item| match *item {
            CronItem::LastOf(d) => Some(format!("the last {}", day_name(d))),
            CronItem::Nth(d, n) => Some(format!(
                "the {} {}",
                NTH.get(n as usize - 1).copied().unwrap_or("n-th"),
                day_name(d)
            )),
            _ => None,
        })
        .collect();
    let days = (!plain.is_empty()).then(|| {
        let mut set = [false; 7];
        for day in expand(CronField::DayOfWeek, &plain) {
            set[day as usize % 7] = true;
        }
        weekday_runs(set)
    });
    let specials = (!specials.is_empty()).then(|| join(&specials));
    (days, specials)
}

/// A set of weekdays (Sunday = 0) in words, Monday first, three or more days in a row
/// (also across the weekend) as "Friday to Sunday".
fn weekday_runs(set: [bool; 7]) -> String {
    if set.iter().all(|on| *on) {
        return "every day of the week".to_string();
    }
    // Monday-first order; start at the first day whose previous day is not in the set.
    let order: [u32; 7] = [1, 2, 3, 4, 5, 6, 0];
    let on = |i: usize| set[order[i % 7] as usize];
    let start = (0..7).find(|&i| on(i) && !on(i + 6)).unwrap_or(0);
    let mut words = Vec::new();
    let mut i = 0;
    while i < 7 {
        if !on(start + i) {
            i += 1;
            continue;
        }
        let mut len = 1;
        while i + len < 7 && on(start + i + len) {
            len += 1;
        }
        let name = |k: usize| day_name(order[(start + i + k) % 7]);
        if len >= 3 {
            words.push(format!("{} to {}", name(0), name(len - 1)));
        } else {
            words.extend((0..len).map(|k| name(k).to_string()));
        }
        i += len;
    }
    join(&words)
}

/// The months a field selects: "January", "January to June", "January, April, July and
/// October".
fn month_words(items: &[CronItem]) -> String {
    let values = expand(CronField::Month, items);
    let name = |v: u32| {
        u8::try_from(v)
            .ok()
            .and_then(|v| Month::try_from(v).ok())
            .map_or_else(|| v.to_string(), |month| month.name().to_string())
    };
    let mut words = Vec::new();
    let mut i = 0;
    while i < values.len() {
        let mut len = 1;
        while i + len < values.len() && values[i + len] == values[i] + len as u32 {
            len += 1;
        }
        if len >= 3 {
            words.push(format!(
                "{} to {}",
                name(values[i]),
                name(values[i + len - 1])
            ));
        } else {
            words.extend(values[i..i + len].iter().map(|v| name(*v)));
        }
        i += len;
    }
    join(&words)
}
