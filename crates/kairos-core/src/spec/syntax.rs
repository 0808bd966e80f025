//! Our own reading of the cron text, before `croner` sees it: every rule of docs/design.md §4.1
//! checked field by field so an error names the field, the value and the rule, then the
//! expression read into its items ([`CronExpr`]), from which `croner` gets the 7 numeric
//! fields it parses unambiguously.

use super::cron::{weekday_name, CronExpr, CronItem};
use super::{CronField, JobKind, SpecError};

/// A cron expression that passed the syntax rules.
#[derive(Debug, Clone)]
pub(crate) struct CronText {
    /// The fields' items, names replaced by numbers, `?` by `*`.
    pub(crate) expr: CronExpr,
    /// Fixed-time or wildcard (docs/design.md §4 rule 4).
    pub(crate) kind: JobKind,
}

/// Checks a 5, 6 or 7 field expression and reads it into its items.
pub(crate) fn read(expr: &str) -> Result<CronText, SpecError> {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    let (second, rest, year) = match fields.len() {
        5 => (None, &fields[..], None),
        6 => (Some(fields[0]), &fields[1..], None),
        7 => (Some(fields[0]), &fields[1..6], Some(fields[6])),
        found => return Err(SpecError::FieldCount { found }),
    };
    let [minute, hour, dom, month, dow] = [rest[0], rest[1], rest[2], rest[3], rest[4]];

    let second_items = match second {
        Some(text) => read_field(CronField::Second, text)?.0,
        None => vec![CronItem::Value(0)],
    };
    let minute_items = read_field(CronField::Minute, minute)?.0;
    let hour_items = read_field(CronField::Hour, hour)?.0;
    let dom_items = read_field(CronField::DayOfMonth, dom)?.0;
    let month_items = read_field(CronField::Month, month)?.0;
    let (dow_items, both_days) = read_field(CronField::DayOfWeek, dow)?;
    let year_items = match year {
        Some(text) => read_field(CronField::Year, text)?.0,
        None => vec![CronItem::Any],
    };
    check_day_fields(dom, dow)?;

    let starts_wild = |text: &str| text.starts_with('*');
    let wildcard = starts_wild(minute) || starts_wild(hour) || second.is_some_and(starts_wild);
    let kind = if wildcard {
        JobKind::Wildcard
    } else {
        JobKind::FixedTime
    };
    let expr = CronExpr::new(
        [
            second_items,
            minute_items,
            hour_items,
            dom_items,
            month_items,
            dow_items,
            year_items,
        ],
        both_days,
    );
    Ok(CronText { expr, kind })
}

/// A day field restricts days unless it is `*` or `?`.
fn restricts(day_field: &str) -> bool {
    !matches!(day_field, "*" | "?")
}

/// `*/2` in one day field with the other restricted: Vixie treats a field starting with `*`
/// as unrestricted (AND), others as OR; refuse rather than guess.
fn check_day_fields(dom: &str, dow: &str) -> Result<(), SpecError> {
    if dow.starts_with('+') {
        return Ok(());
    }
    let stepped_star = |text: &str| text.starts_with('*') && text != "*";
    if (stepped_star(dom) && restricts(dow)) || (stepped_star(dow) && restricts(dom)) {
        return Err(SpecError::DayFields {
            dom: dom.to_string(),
            dow: dow.to_string(),
            rule: "a day field that starts with '*' but is not '*' next to a restricted other \
                   day field is read differently by cron implementations; write the days as \
                   a list or range (e.g. 1-31/2), or put '+' before day-of-week to require both",
        });
    }
    Ok(())
}

/// A field's items, and whether it began with `+` (day-of-week only).
fn read_field(field: CronField, text: &str) -> Result<(Vec<CronItem>, bool), SpecError> {
    let upper = text.to_ascii_uppercase();
    let (both_days, body) = match upper.strip_prefix('+') {
        Some(body) if field == CronField::DayOfWeek => (true, body),
        Some(_) => {
            return Err(SpecError::field(
                field,
                text,
                "'+' is only allowed before the day-of-week field (it means: both day fields must match)",
            ))
        }
        None => (false, upper.as_str()),
    };
    let items: Vec<&str> = body.split(',').collect();
    let mut out = Vec::with_capacity(items.len());
    for item in &items {
        if item.is_empty() {
            return Err(SpecError::field(field, text, "empty item in list"));
        }
        if items.len() > 1 && matches!(*item, "*" | "?") {
            return Err(SpecError::field(
                field,
                text,
                format!("'{item}' must stand alone, not in a list"),
            ));
        }
        out.push(read_item(field, text, item)?);
    }
    Ok((out, both_days))
}

fn read_item(field: CronField, text: &str, item: &str) -> Result<CronItem, SpecError> {
    let err = |rule: String| SpecError::field(field, text, rule);
    let is_day = matches!(field, CronField::DayOfMonth | CronField::DayOfWeek);
    match item {
        "*" => return Ok(CronItem::Any),
        "?" if is_day => return Ok(CronItem::Any),
        "?" => {
            return Err(err(
                "'?' is only allowed in the day-of-month and day-of-week fields".into(),
            ))
        }
        _ => {}
    }
    if let Some((base, step)) = item.split_once('/') {
        let step = parse_step(field, step).map_err(err)?;
        return match base {
            "*" => Ok(CronItem::Step(None, step)),
            _ if base.contains('-') => {
                Ok(CronItem::Step(Some(range(field, base).map_err(err)?), step))
            }
            _ => {
                let (_, max) = field.bounds();
                Err(err(format!(
                    "'{base}/{step}' is not accepted (cron implementations disagree on where it \
                     ends): write '{base}-{max}/{step}' or '*/{step}'"
                )))
            }
        };
    }
    if field == CronField::DayOfMonth {
        if let Some(special) = day_of_month_special(item).map_err(err)? {
            return Ok(special);
        }
    }
    if field == CronField::DayOfWeek {
        if let Some(special) = day_of_week_special(item).map_err(err)? {
            return Ok(special);
        }
    }
    if item.contains('-') {
        let (start, end) = range(field, item).map_err(err)?;
        return Ok(CronItem::Range(start, end));
    }
    Ok(CronItem::Value(value(field, item, false).map_err(err)?))
}

/// `L`, `LW`, `nW` in day-of-month.
fn day_of_month_special(item: &str) -> Result<Option<CronItem>, String> {
    match item {
        "L" => return Ok(Some(CronItem::LastDay)),
        "LW" => return Ok(Some(CronItem::LastWeekday)),
        _ => {}
    }
    if item.starts_with('L') {
        return Err(format!(
            "'{item}' is not supported: day-of-month accepts 'L' (last day) and 'LW' (last weekday)"
        ));
    }
    if let Some(day) = item.strip_suffix('W') {
        let day = number(CronField::DayOfMonth, day)?;
        return Ok(Some(CronItem::NearestWeekday(day)));
    }
    if item.contains('W') || item.contains('#') {
        return Err(format!("'{item}' is not a day-of-month value"));
    }
    Ok(None)
}

/// `dL` (last weekday d of the month), `d#n`, `d#L` in day-of-week.
fn day_of_week_special(item: &str) -> Result<Option<CronItem>, String> {
    if item == "L" {
        return Err(
            "a bare 'L' in day-of-week is ambiguous: write 'nL' for the last weekday n of \
                    the month (5L = last Friday), or 'L' in day-of-month for the month's last day"
                .into(),
        );
    }
    let special = |day: &str| -> Result<u32, String> {
        if day.contains('-') {
            return Err(format!(
                "'{item}': '#' and 'L' apply to a single weekday, not a range"
            ));
        }
        value(CronField::DayOfWeek, day, false)
    };
    if let Some((day, nth)) = item.split_once('#') {
        let day = special(day)?;
        if nth == "L" {
            return Ok(Some(CronItem::LastOf(day)));
        }
        return match nth.parse::<u32>() {
            Ok(n @ 1..=5) => Ok(Some(CronItem::Nth(day, n))),
            _ => Err(format!(
                "'#{nth}' must be #1 to #5 or #L (the n-th or last weekday of the month)"
            )),
        };
    }
    if let Some(day) = item.strip_suffix('L') {
        // `WEDL` reads as a name glued to `L`; no cron spells the last Wednesday that way
        // (Quartz writes `4L`, croniter `L3`), so ask for the number rather than guess.
        if let Some(number) = weekday_number(day) {
            return Err(format!(
                "'{item}' is not a form: write the weekday number before L \
                 ({number}L = last {}, or {day}#L)",
                weekday_name(number).unwrap_or_default()
            ));
        }
        let day = special(day)?;
        return Ok(Some(CronItem::LastOf(day)));
    }
    // `WED` is a name, not a `W`: the nearest-weekday modifier is a `W` beside a number
    // or `L` (`5W`, `W5`, `LW`) or alone. A word of letters is left to the name lookup,
    // which accepts `WED` and calls `WEDS` no weekday name. Each end of a range is looked
    // at on its own, so that `MON-WED` and `WED-5` pass and `MON-5W` does not.
    let modifier = |part: &str| {
        part.contains('W')
            && (matches!(part, "W" | "LW") || !part.chars().all(|c| c.is_ascii_alphabetic()))
    };
    if item.split('-').any(modifier) {
        return Err("'W' belongs in day-of-month (nearest weekday), not day-of-week".into());
    }
    Ok(None)
}

/// Weekday names as `value` reads them (upper case; `SUN` is 0).
const WEEKDAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// The number of an upper-case weekday name (`WED` is 3); `None` for anything else.
fn weekday_number(text: &str) -> Option<u32> {
    WEEKDAY_NAMES
        .iter()
        .position(|name| *name == text)
        .and_then(|i| u32::try_from(i).ok())
}

/// `a-b` as its two ends.
fn range(field: CronField, item: &str) -> Result<(u32, u32), String> {
    let (start, end) = item
        .split_once('-')
        .ok_or_else(|| format!("'{item}' is not a range"))?;
    if start.is_empty() || end.is_empty() || end.contains('-') {
        return Err(format!("'{item}' is not a range: write 'a-b'"));
    }
    let start = value(field, start, false)?;
    // `SUN` ends a range as 7, so `FRI-SUN` is Friday to Sunday; after Sunday itself it
    // stays 0, so `SUN-SUN` is Sunday (as `MON-MON` is Monday), not the whole week.
    let end = value(field, end, start != 0)?;
    if start > end {
        return Err(format!(
            "range {start}-{end} runs backwards: write it low to high (or as a list)"
        ));
    }
    Ok((start, end))
}

fn parse_step(field: CronField, step: &str) -> Result<u32, String> {
    let (min, max) = field.bounds();
    let span = max - min + 1;
    match step.parse::<u32>() {
        Ok(n) if (1..=span).contains(&n) => Ok(n),
        Ok(n) => Err(format!("step {n} is outside 1-{span}")),
        Err(_) => Err(format!("step '{step}' is not a whole number")),
    }
}

/// A number or a name (`JAN`, `MON`); `SUN` as `range_end` is 7 so `FRI-SUN` works.
fn value(field: CronField, text: &str, range_end: bool) -> Result<u32, String> {
    const MONTHS: [&str; 12] = [
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ];
    if text.chars().all(|c| c.is_ascii_alphabetic()) {
        let found = match field {
            CronField::Month => MONTHS.iter().position(|m| *m == text).map(|i| i as u32 + 1),
            CronField::DayOfWeek => {
                weekday_number(text).map(|n| if n == 0 && range_end { 7 } else { n })
            }
            _ => None,
        };
        return found.ok_or_else(|| match field {
            CronField::Month => format!("'{text}' is not a month name (JAN-DEC)"),
            CronField::DayOfWeek => format!("'{text}' is not a weekday name (SUN-SAT)"),
            _ => format!("'{text}' is not a number"),
        });
    }
    number(field, text)
}

fn number(field: CronField, text: &str) -> Result<u32, String> {
    let (min, max) = field.bounds();
    match text.parse::<u32>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        Ok(n) => Err(format!("value {n} is outside {min}-{max}")),
        Err(_) => Err(format!("'{text}' is not a number")),
    }
}
