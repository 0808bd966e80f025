//! kairos compared with cronie's matching rules on the generator's 5-field expressions.
//!
//! cronie (the cron of Fedora, RHEL and many other distributions) is a daemon, not a
//! library, so its rules are written here as an independent matcher that shares nothing
//! with kairos's parser: the grammar of cronie's `entry.c` (`*`, numbers, three-letter
//! names in any case, `a-b`, `/n` after `*` or a range only, lists; a range written high to
//! low, a step of 0, a value out of range, a step after a single value are refused; `7` is
//! Sunday) and its day rule (when either day field starts with `*`, both must match,
//! otherwise either). Only the forms cronie knows are compared (no seconds, `?`, `L`, `W`,
//! `#`), in UTC, where no DST rule applies: cronie's DST handling is part of its daemon loop
//! (docs/time.md, "Compared with croniter").

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Timelike, Utc};
use kairos_core::SpecError;

use super::*;

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 8] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// A crontab line's time fields as cronie holds them.
struct Entry {
    minute: Vec<bool>,
    hour: Vec<bool>,
    dom: Vec<bool>,
    month: Vec<bool>,
    dow: Vec<bool>,
    /// Either day field starts with `*`: both day fields must match.
    day_star: bool,
}

/// One number or name of a field; `None` when cronie refuses it.
fn number(text: &str, low: u32, names: &[&str]) -> Option<u32> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().ok();
    }
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_alphabetic()) {
        return None;
    }
    let position = names.iter().position(|n| n.eq_ignore_ascii_case(text))?;
    Some(position as u32 + low)
}

/// The values a field allows, indexed from 0; `None` when cronie refuses the field.
fn field(text: &str, low: u32, high: u32, names: &[&str]) -> Option<Vec<bool>> {
    let mut bits = vec![false; high as usize + 1];
    for range in text.split(',') {
        let (base, step) = match range.split_once('/') {
            Some((base, step)) => (base, Some(number(step, 0, &[])?)),
            None => (range, None),
        };
        let (first, last) = if base == "*" {
            (low, high)
        } else if let Some((a, b)) = base.split_once('-') {
            let (a, b) = (number(a, low, names)?, number(b, low, names)?);
            if a > b {
                return None;
            }
            (a, b)
        } else {
            // A step after a single value is refused: the number must end at `,`, `-` or
            // the end of the field.
            if step.is_some() {
                return None;
            }
            let a = number(base, low, names)?;
            (a, a)
        };
        let step = step.unwrap_or(1);
        if step == 0 {
            return None;
        }
        let mut value = first;
        while value <= last {
            if value < low || value > high {
                return None;
            }
            bits[value as usize] = true;
            value += step;
        }
    }
    Some(bits)
}

/// A 5-field expression as cronie reads it; `None` when cronie refuses it.
fn entry(expr: &str) -> Option<Entry> {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    let [minute, hour, dom, month, dow] = fields[..] else {
        return None;
    };
    let mut days = field(dow, 0, 7, &DAYS)?;
    if days[0] || days[7] {
        days[0] = true;
        days[7] = true;
    }
    Some(Entry {
        minute: field(minute, 0, 59, &[])?,
        hour: field(hour, 0, 23, &[])?,
        dom: field(dom, 1, 31, &[])?,
        month: field(month, 1, 12, &MONTHS)?,
        dow: days,
        day_star: dom.starts_with('*') || dow.starts_with('*'),
    })
}

/// How far both sides are compared: eight years, so that a yearly expression still shows
/// several fire times and a leap day two.
fn horizon(start: DateTime<Utc>) -> DateTime<Utc> {
    start + Duration::days(8 * 366)
}

/// cronie's first fire times after `start` (UTC), before the horizon.
fn cronie(entry: &Entry, start: DateTime<Utc>) -> Series {
    let mut times = Vec::new();
    let mut day: NaiveDate = start.date_naive();
    while day < horizon(start).date_naive() && times.len() < FIRES {
        let dom = entry.dom[day.day() as usize];
        let dow = entry.dow[day.weekday().num_days_from_sunday() as usize];
        let day_matches = if entry.day_star {
            dom && dow
        } else {
            dom || dow
        };
        if entry.month[day.month() as usize] && day_matches {
            for hour in (0..24).filter(|h| entry.hour[*h as usize]) {
                for minute in (0..60).filter(|m| entry.minute[*m as usize]) {
                    let at =
                        Utc.from_utc_datetime(&day.and_hms_opt(hour, minute, 0).expect("a time"));
                    if at > start && at < horizon(start) && times.len() < FIRES {
                        times.push(at);
                    }
                }
            }
        }
        day += Duration::days(1);
    }
    times
}

/// The first `expressions` of the generator's expressions in the forms cronie knows.
fn cronie_forms(expressions: usize) -> Vec<String> {
    let mut rng = Rng(SEED);
    std::iter::repeat_with(|| expression(&mut rng))
        .filter(|e| !e.seconds_first)
        .map(|e| e.kairos)
        .filter(|e| !e.contains(['?', 'L', 'W', '#']))
        .take(expressions)
        .collect()
}

#[test]
fn kairos_matches_cronie_on_five_field_expressions_except_by_its_documented_rules() {
    let full = std::env::var("KAIROS_CRON_DIFF_FULL").is_ok_and(|v| v == "1");
    let expressions = if full {
        FULL_EXPRESSIONS
    } else {
        CI_EXPRESSIONS
    };
    let utc = parse_zone("UTC").expect("UTC");
    let starts = [
        Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap(),
        Utc.with_ymd_and_hms(2025, 6, 14, 17, 23, 0).unwrap(),
    ];
    let (mut compared, mut identical, mut both_refuse) = (0, 0, 0);
    let (mut star_day, mut sunday_end, mut never) = (0, 0, 0);
    let mut unexplained = Vec::new();
    for expr in cronie_forms(expressions) {
        for start in starts {
            compared += 1;
            let ours = kairos(&expr, utc, start, None);
            match (&ours, entry(&expr)) {
                (Ok(ours), Some(entry)) => {
                    let theirs = cronie(&entry, start);
                    let ours: Series = ours
                        .iter()
                        .copied()
                        .take_while(|t| *t < horizon(start))
                        .collect();
                    if ours == theirs {
                        identical += 1;
                    } else {
                        unexplained.push(format!(
                            "`{expr}` after {start}:\n  kairos: {}\n  cronie: {}",
                            show(&ours[..ours.len().min(4)], utc),
                            show(&theirs[..theirs.len().min(4)], utc)
                        ));
                    }
                }
                (Err(_), None) => both_refuse += 1,
                (Err(err), Some(_)) if star_day_refusal(&expr, err) => star_day += 1,
                (Ok(_), None) if sunday_ends_a_range(&expr) => sunday_end += 1,
                // kairos refuses an expression that never fires; cronie takes the line and
                // never runs it.
                (Err(SpecError::NeverFires { .. }), Some(entry))
                    if cronie(&entry, start).is_empty() =>
                {
                    never += 1
                }
                (ours, theirs) => unexplained.push(format!(
                    "`{expr}` after {start}: kairos {}, cronie {}",
                    ours.as_ref()
                        .map_or_else(|e| format!("refuses ({e})"), |_| "accepts".into()),
                    if theirs.is_some() {
                        "accepts"
                    } else {
                        "refuses"
                    }
                )),
            }
        }
    }
    println!(
        "cronie's rules, seed {SEED:#x}: {compared} cases ({expressions} 5-field expressions x \
         2 starts, UTC): \
         {identical} identical, {both_refuse} refused by both, {star_day} refused by kairos \
         only (a day field starting with `*` beside a restricted one; cronie ANDs the two), \
         {sunday_end} refused by cronie only (a weekday range ending in the name SUN), {never} \
         refused by kairos as never firing, {} unexplained",
        unexplained.len()
    );
    assert!(
        unexplained.is_empty(),
        "{} case(s) differ from cronie's rules by no documented rule; the first ones:\n{}",
        unexplained.len(),
        unexplained[..unexplained.len().min(10)].join("\n")
    );
    assert!(
        identical * 2 > compared,
        "only {identical} of {compared} identical"
    );
    assert_eq!(compared, 2 * expressions);
}

/// cronie refuses `expr` (and kairos accepts it) because a weekday range ends in the name
/// `SUN`: cronie reads that name as 0 only, so `SAT-SUN` runs backwards; kairos reads `SUN`
/// at a range's end as 7 (Saturday and Sunday). Every other weekday field of `expr` must be
/// one cronie accepts.
fn sunday_ends_a_range(expr: &str) -> bool {
    let Some(dow) = expr.split_whitespace().nth(4) else {
        return false;
    };
    let as_seven = dow
        .split(',')
        .map(|item| {
            let (base, step) = item
                .split_once('/')
                .map_or((item, None), |(b, s)| (b, Some(s)));
            match base.split_once('-') {
                Some((a, b)) if b.eq_ignore_ascii_case("sun") => {
                    format!("{a}-7{}", step.map_or(String::new(), |s| format!("/{s}")))
                }
                _ => item.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(",");
    as_seven != dow && entry(&expr.replace(dow, &as_seven)).is_some()
}

fn ts(text: &str) -> DateTime<Utc> {
    text.parse().expect("RFC 3339")
}

/// kairos refused `expr` by the rule that a day field starting with `*` (but not `*`) may
/// not stand beside a restricted one, where cronie reads both as ANDed.
fn star_day_refusal(expr: &str, err: &SpecError) -> bool {
    refusal(expr, err) == Some(Rule::StarDayField)
}

#[test]
fn the_cronie_matcher_follows_cronies_rules() {
    let start = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
    let first = |expr: &str| {
        cronie(&entry(expr).expect("cronie accepts it"), start)
            .first()
            .map(|t| (t.month(), t.day(), t.hour(), t.minute()))
    };
    // Either day field starting with `*` ANDs them: the first Monday that is odd.
    assert_eq!(first("0 0 */2 * MON"), Some((1, 13, 0, 0)));
    // Both restricted: either. The start (1 January 2025, a Wednesday, 00:00) is excluded;
    // the 5th comes before the next Wednesday.
    assert_eq!(first("0 0 5 * WED"), Some((1, 5, 0, 0)));
    assert_eq!(first("0 0 6 * WED"), Some((1, 6, 0, 0)));
    assert_eq!(first("0 0 9 * WED"), Some((1, 8, 0, 0)));
    assert_eq!(first("0 0 5 * sun"), Some((1, 5, 0, 0)));
    assert_eq!(first("0 0 * * 7"), Some((1, 5, 0, 0)));
    assert_eq!(first("5-5 * * * *"), Some((1, 1, 0, 5)));
    assert_eq!(first("0 0 1 jul-AUG *"), Some((7, 1, 0, 0)));
    // docs/time.md's examples, each differing by its rule and by nothing else.
    let utc = parse_zone("UTC").expect("UTC");
    let refused_by_kairos = |expr: &str| kairos(expr, utc, start, None).expect_err(expr);
    assert!(star_day_refusal(
        "0 0 */2 * MON",
        &refused_by_kairos("0 0 */2 * MON")
    ));
    assert!(entry("0 0 * * SAT-SUN").is_none() && sunday_ends_a_range("0 0 * * SAT-SUN"));
    let weekend = kairos("0 0 * * SAT-SUN", utc, start, None).expect("kairos accepts it");
    assert_eq!(
        weekend[..2],
        [ts("2025-01-04T00:00:00Z"), ts("2025-01-05T00:00:00Z")]
    );
    assert!(matches!(
        refused_by_kairos("0 0 31 APR *"),
        SpecError::NeverFires { .. }
    ));
    assert!(cronie(&entry("0 0 31 APR *").expect("cronie accepts it"), start).is_empty());
    for refused in [
        "5/15 * * * *",
        "0 0 * * FRI-MON",
        "*/0 * * * *",
        "60 * * * *",
        "0 0 ? * *",
    ] {
        assert!(entry(refused).is_none(), "{refused}");
    }
}
