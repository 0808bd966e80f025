//! A schedule's spec in words ("at 07:00, on Monday to Friday"), for people reading the page.
//!
//! Every form the spec parser accepts reads as a sentence: 5, 6 (seconds first) and 7
//! (year last) fields, `*`, `?`, values, names (`MON`, `JAN`), ranges, steps, lists, `L`,
//! `LW`, `nW`, `dL`, `d#n`, `d#L`, a `+` before day-of-week (both day fields must match),
//! the nicknames (`@daily` …), `@every`, `@at` and `@after`. A spec the parser refuses is
//! shown as written, never refused here (it was validated when it was stored).

use kairos_core::{ChainOn, Spec};

/// Weekday names by cron number (`0` and `7` are Sunday).
const DAYS: [&str; 8] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const MONTH_NAMES: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
const NTH: [&str; 5] = ["first", "second", "third", "fourth", "fifth"];
/// At most this many times are listed one by one ("at 09:00, 12:00 and 17:30").
const MAX_LISTED_TIMES: usize = 8;

/// The spec in words, with the zone its wall times are in.
pub fn describe(spec: &str, zone: &str) -> String {
    let trimmed = spec.trim();
    let Ok(parsed) = Spec::parse(trimmed) else {
        return format!("{trimmed} (in {zone})");
    };
    if let Some(chain) = parsed.chain() {
        let parent = &chain.parent;
        return match chain.on {
            ChainOn::Success => format!("after each run of schedule {parent} that succeeds"),
            ChainOn::Failure => {
                format!("after each run of schedule {parent} that fails for good (no attempt left)")
            }
            ChainOn::Always => format!(
                "after each run of schedule {parent} that ends (succeeds, fails for good or is \
                 cancelled)"
            ),
        };
    }
    let (head, rest) = trimmed
        .split_once(char::is_whitespace)
        .unwrap_or((trimmed, ""));
    if head.eq_ignore_ascii_case("@every") {
        return format!(
            "{} (counted from the start, not the wall clock)",
            every_words(rest.trim())
        );
    }
    if head.eq_ignore_ascii_case("@at") {
        return format!("once, at {}", rest.trim());
    }
    let expanded = match trimmed.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        _ => trimmed,
    };
    match cron_words(expanded) {
        Some(words) => format!("{words}, wall time in {zone}"),
        None => format!("{trimmed} (in {zone})"),
    }
}

/// `90s` → "every 90 seconds", `1h30m` → "every 1 hour and 30 minutes", `1d` → "every day".
fn every_words(duration: &str) -> String {
    let mut parts = Vec::new();
    let mut digits = String::new();
    for ch in duration.chars() {
        if ch.is_ascii_digit() {
            digits.push(ch);
            continue;
        }
        let unit = match ch {
            's' => "second",
            'm' => "minute",
            'h' => "hour",
            _ => "day",
        };
        let amount: u64 = digits.parse().unwrap_or(0);
        digits.clear();
        parts.push((amount, unit));
    }
    match parts.as_slice() {
        [(1, unit)] => format!("every {unit}"),
        _ => {
            let words: Vec<String> = parts
                .iter()
                .map(|(amount, unit)| plural(*amount, unit))
                .collect();
            format!("every {}", join(&words))
        }
    }
}

fn plural(amount: u64, unit: &str) -> String {
    if amount == 1 {
        format!("1 {unit}")
    } else {
        format!("{amount} {unit}s")
    }
}

/// One item of a cron field's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    /// `*` or `?`.
    Any,
    Value(u32),
    Range(u32, u32),
    /// `*/n` (`None`) or `a-b/n`.
    Step(Option<(u32, u32)>, u32),
    /// `L` in day-of-month.
    Last,
    /// `LW` in day-of-month.
    LastWeekday,
    /// `nW` in day-of-month.
    NearestWeekday(u32),
    /// `dL` or `d#L` in day-of-week.
    LastOf(u32),
    /// `d#n` in day-of-week.
    Nth(u32, u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
    Year,
}

impl Field {
    fn bounds(self) -> (u32, u32) {
        match self {
            Field::Second | Field::Minute => (0, 59),
            Field::Hour => (0, 23),
            Field::DayOfMonth => (1, 31),
            Field::Month => (1, 12),
            Field::DayOfWeek => (0, 7),
            Field::Year => (1970, 2199),
        }
    }
}

/// A field's items; `None` for a form this reader does not know (the caller shows the text).
fn items(field: Field, text: &str) -> Option<Vec<Item>> {
    text.to_ascii_uppercase()
        .split(',')
        .map(|part| item(field, part))
        .collect()
}

fn item(field: Field, text: &str) -> Option<Item> {
    if text == "*" || text == "?" {
        return Some(Item::Any);
    }
    if let Some((base, step)) = text.split_once('/') {
        let step = step.parse().ok()?;
        if base == "*" {
            return Some(Item::Step(None, step));
        }
        let (a, b) = base.split_once('-')?;
        return Some(Item::Step(
            Some((value(field, a, false)?, value(field, b, true)?)),
            step,
        ));
    }
    if field == Field::DayOfMonth {
        match text {
            "L" => return Some(Item::Last),
            "LW" => return Some(Item::LastWeekday),
            _ => {}
        }
        if let Some(day) = text.strip_suffix('W') {
            return Some(Item::NearestWeekday(day.parse().ok()?));
        }
    }
    if field == Field::DayOfWeek {
        if let Some((day, nth)) = text.split_once('#') {
            let day = value(field, day, false)?;
            return match nth {
                "L" => Some(Item::LastOf(day)),
                _ => Some(Item::Nth(day, nth.parse().ok()?)),
            };
        }
        if let Some(day) = text.strip_suffix('L') {
            return Some(Item::LastOf(value(field, day, false)?));
        }
    }
    if let Some((a, b)) = text.split_once('-') {
        let start = value(field, a, false)?;
        return Some(Item::Range(start, value(field, b, start != 0)?));
    }
    Some(Item::Value(value(field, text, false)?))
}

/// A number or a name; `SUN` ending a range is 7.
fn value(field: Field, text: &str, range_end: bool) -> Option<u32> {
    let named = match field {
        Field::Month => MONTH_NAMES.iter().position(|m| *m == text).map(|i| i + 1),
        Field::DayOfWeek => {
            DAY_NAMES
                .iter()
                .position(|d| *d == text)
                .map(|i| if i == 0 && range_end { 7 } else { i })
        }
        _ => None,
    };
    match named {
        Some(n) => u32::try_from(n).ok(),
        None => text.parse().ok(),
    }
}

/// Every value a field's plain items (values, ranges, steps, `*`) select, ascending.
fn expand(field: Field, items: &[Item]) -> Vec<u32> {
    let (min, max) = field.bounds();
    let mut values: Vec<u32> = Vec::new();
    for item in items {
        match *item {
            Item::Any => values.extend(min..=max),
            Item::Value(v) => values.push(v),
            Item::Range(a, b) => values.extend(a..=b),
            Item::Step(range, step) => {
                let (a, b) = range.unwrap_or((min, max));
                values.extend((a..=b).step_by(step.max(1) as usize));
            }
            _ => {}
        }
    }
    values.sort_unstable();
    values.dedup();
    values
}

/// The plain values of a field written as values only (`0`, `9,17`).
fn plain(items: &[Item]) -> Option<Vec<u32>> {
    items
        .iter()
        .map(|item| match item {
            Item::Value(v) => Some(*v),
            _ => None,
        })
        .collect()
}

fn is_any(items: &[Item]) -> bool {
    items == [Item::Any]
}

/// `*` or `*/n`: the field covers its whole span evenly.
fn is_even(items: &[Item]) -> bool {
    matches!(items, [Item::Any] | [Item::Step(None, _)])
}

/// "a", "a and b", "a, b and c".
fn join(words: &[String]) -> String {
    match words {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn clock(hour: u32, minute: u32, second: Option<u32>) -> String {
    match second {
        Some(second) => format!("{hour:02}:{minute:02}:{second:02}"),
        None => format!("{hour:02}:{minute:02}"),
    }
}

/// The cron expression in words (without the zone); `None` for a form not known here.
fn cron_words(expr: &str) -> Option<String> {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    let (second, rest, year) = match fields.len() {
        5 => ("0", &fields[..], None),
        6 => (fields[0], &fields[1..], None),
        7 => (fields[0], &fields[1..6], Some(fields[6])),
        _ => return None,
    };
    let second = items(Field::Second, second)?;
    let minute = items(Field::Minute, rest[0])?;
    let hour = items(Field::Hour, rest[1])?;
    let dom = items(Field::DayOfMonth, rest[2])?;
    let month = items(Field::Month, rest[3])?;
    let (both, dow_text) = match rest[4].strip_prefix('+') {
        Some(text) => (true, text),
        None => (false, rest[4]),
    };
    let dow = items(Field::DayOfWeek, dow_text)?;
    let mut sentence = time_words(&second, &minute, &hour);
    let days = day_words(&dom, &dow, &month, both);
    if !(days == "every day" && is_any(&hour)) {
        sentence.push_str(", ");
        sentence.push_str(&days);
    }
    if let Some(year) = year {
        let year = items(Field::Year, year)?;
        if !is_any(&year) {
            sentence.push_str(&format!(", in {}", list_words(&year, &|v| v.to_string())));
        }
    }
    Some(sentence)
}

/// The time of day: "at 07:00", "every 5 minutes between 09:00 and 17:59", "every 5 seconds".
fn time_words(second: &[Item], minute: &[Item], hour: &[Item]) -> String {
    let seconds = plain(second);
    let with_seconds = |s: u32| (seconds.as_deref() != Some(&[0])).then_some(s);
    // Only fixed values: list the times.
    if let (Some(ss), Some(ms), Some(hs)) = (&seconds, plain(minute), plain(hour)) {
        if ss.len() * ms.len() * hs.len() <= MAX_LISTED_TIMES {
            let mut times = Vec::new();
            for h in expand(
                Field::Hour,
                &hs.iter().map(|v| Item::Value(*v)).collect::<Vec<_>>(),
            ) {
                for m in expand(
                    Field::Minute,
                    &ms.iter().map(|v| Item::Value(*v)).collect::<Vec<_>>(),
                ) {
                    for s in expand(
                        Field::Second,
                        &ss.iter().map(|v| Item::Value(*v)).collect::<Vec<_>>(),
                    ) {
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
            [Item::Any] => {
                return match with_seconds(*s) {
                    Some(s) => format!("at second {s} of minute {m} of every hour"),
                    None => format!("at minute {m} of every hour"),
                }
            }
            [Item::Range(a, b)] => return format!("every hour from {} to {}", at(*a), at(*b)),
            [Item::Step(range, step)] => {
                let (a, b) = range.unwrap_or((0, 23));
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
        [Item::Any] if finest_even => {}
        [Item::Any] => parts.push("of every hour".to_string()),
        _ => parts.push(hour_words(hour)),
    }
    parts.join(" ")
}

/// The finest restricted time field: "every 5 minutes", "at minutes 0 and 30".
fn lead(items: &[Item], unit: &str) -> String {
    match items {
        [Item::Any] => format!("every {unit}"),
        [Item::Step(None, n)] => format!("every {n} {unit}s"),
        [Item::Range(a, b)] => format!("every {unit} from {unit} {a} to {b}"),
        [Item::Step(Some((a, b)), n)] => format!("every {n} {unit}s from {unit} {a} to {b}"),
        [Item::Value(v)] => format!("at {unit} {v}"),
        _ => format!("at {unit}s {}", list_words(items, &|v| v.to_string())),
    }
}

/// A coarser field after a finer one: "of minute 30", "of every 5th minute".
fn qualifier(items: &[Item], unit: &str) -> String {
    match items {
        [Item::Any] => format!("of every {unit}"),
        [Item::Step(None, n)] => format!("of every {} {unit}", ordinal(*n)),
        [Item::Value(v)] => format!("of {unit} {v}"),
        _ => format!("of {unit}s {}", list_words(items, &|v| v.to_string())),
    }
}

/// The hours as a scope: "between 09:00 and 17:59", "in every 2nd hour".
fn hour_words(items: &[Item]) -> String {
    match items {
        [Item::Value(h)] => format!("between {h:02}:00 and {h:02}:59"),
        [Item::Range(a, b)] => format!("between {a:02}:00 and {b:02}:59"),
        [Item::Step(None, n)] => format!("in every {} hour", ordinal(*n)),
        [Item::Step(Some((a, b)), n)] => {
            format!(
                "in every {} hour between {a:02}:00 and {b:02}:59",
                ordinal(*n)
            )
        }
        _ => format!("in hours {}", list_words(items, &|v| format!("{v:02}:00"))),
    }
}

/// Values, ranges and steps of a list, each value named by `name`.
fn list_words(items: &[Item], name: &dyn Fn(u32) -> String) -> String {
    let words: Vec<String> = items
        .iter()
        .map(|item| match *item {
            Item::Range(a, b) => format!("{} to {}", name(a), name(b)),
            Item::Step(None, n) => format!("every {}", ordinal(n)),
            Item::Step(Some((a, b)), n) => {
                format!("every {} from {} to {}", ordinal(n), name(a), name(b))
            }
            Item::Value(v) => name(v),
            _ => "every".to_string(),
        })
        .collect();
    join(&words)
}

/// The days: "every day", "on Monday to Friday", "on the last day of the month".
fn day_words(dom: &[Item], dow: &[Item], month: &[Item], both: bool) -> String {
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
            let text = if both {
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
fn dom_words(items: &[Item]) -> String {
    let words: Vec<String> = items
        .iter()
        .map(|item| match *item {
            Item::Value(d) => format!("the {}", ordinal(d)),
            Item::Range(a, b) => format!("the {} to the {}", ordinal(a), ordinal(b)),
            Item::Step(None, n) => format!("every {} day", ordinal(n)),
            Item::Step(Some((a, b)), n) => format!(
                "every {} day from the {} to the {}",
                ordinal(n),
                ordinal(a),
                ordinal(b)
            ),
            Item::Last => "the last day".to_string(),
            Item::LastWeekday => "the last weekday".to_string(),
            Item::NearestWeekday(d) => format!("the weekday nearest the {}", ordinal(d)),
            _ => "every day".to_string(),
        })
        .collect();
    join(&words)
}

/// Day-of-week items: the plain days ("Monday to Friday") and the days of the month they
/// name ("the second Monday", "the last Friday"), either possibly absent.
fn dow_words(items: &[Item]) -> (Option<String>, Option<String>) {
    let plain: Vec<Item> = items
        .iter()
        .copied()
        .filter(|item| !matches!(item, Item::LastOf(_) | Item::Nth(..)))
        .collect();
    let specials: Vec<String> = items
        .iter()
        .filter_map(|item| match *item {
            Item::LastOf(d) => Some(format!("the last {}", DAYS[d as usize])),
            Item::Nth(d, n) => Some(format!(
                "the {} {}",
                NTH.get(n as usize - 1).copied().unwrap_or("n-th"),
                DAYS[d as usize]
            )),
            _ => None,
        })
        .collect();
    let days = (!plain.is_empty()).then(|| {
        let mut set = [false; 7];
        for day in expand(Field::DayOfWeek, &plain) {
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
    let order = [1, 2, 3, 4, 5, 6, 0];
    let start = (0..7)
        .find(|&i| set[order[i]] && !set[order[(i + 6) % 7]])
        .unwrap_or(0);
    let mut words = Vec::new();
    let mut i = 0;
    while i < 7 {
        let day = order[(start + i) % 7];
        if !set[day] {
            i += 1;
            continue;
        }
        let mut len = 1;
        while i + len < 7 && set[order[(start + i + len) % 7]] {
            len += 1;
        }
        let last = order[(start + i + len - 1) % 7];
        if len >= 3 {
            words.push(format!("{} to {}", DAYS[day], DAYS[last]));
        } else {
            for k in 0..len {
                words.push(DAYS[order[(start + i + k) % 7]].to_string());
            }
        }
        i += len;
    }
    join(&words)
}

/// The months a field selects: "January", "January to June", "January, April, July and
/// October".
fn month_words(items: &[Item]) -> String {
    let values = expand(Field::Month, items);
    let mut words = Vec::new();
    let mut i = 0;
    while i < values.len() {
        let mut len = 1;
        while i + len < values.len() && values[i + len] == values[i] + len as u32 {
            len += 1;
        }
        let name = |v: u32| MONTHS[(v as usize).saturating_sub(1) % 12].to_string();
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
