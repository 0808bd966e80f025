//! The small phrases the time and day sentences share: lists ("a, b and c"), ordinals
//! ("2nd"), and the values a field's items select.

use kairos_core::{CronField, CronItem};

/// "a", "a and b", "a, b and c".
pub(super) fn join(words: &[String]) -> String {
    match words {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// `1` → "1st", `22` → "22nd", `13` → "13th".
pub(super) fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// Every value a field's plain items (values, ranges, steps, `*`) select, ascending; the
/// day specials (`L`, `nW`, `d#n` …) select none here.
pub(super) fn expand(field: CronField, items: &[CronItem]) -> Vec<u32> {
    let (min, max) = field.bounds();
    let mut values: Vec<u32> = Vec::new();
    for item in items {
        match *item {
            CronItem::Any => values.extend(min..=max),
            CronItem::Value(v) => values.push(v),
            CronItem::Range(a, b) => values.extend(a..=b),
            CronItem::Step(range, step) => {
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

/// The values of a field written as values only (`0`, `9,17`); `None` for any other item.
pub(super) fn plain(items: &[CronItem]) -> Option<Vec<u32>> {
    items
        .iter()
        .map(|item| match item {
            CronItem::Value(v) => Some(*v),
            _ => None,
        })
        .collect()
}

/// `*` (or `?`): the field does not restrict.
pub(super) fn is_any(items: &[CronItem]) -> bool {
    items == [CronItem::Any]
}

/// `*` or `*/n`: the field covers its whole span evenly.
pub(super) fn is_even(items: &[CronItem]) -> bool {
    matches!(items, [CronItem::Any] | [CronItem::Step(None, _)])
}

/// Values, ranges and steps of a list, each value named by `name`.
pub(super) fn list_words(items: &[CronItem], name: &dyn Fn(u32) -> String) -> String {
    let words: Vec<String> = items
        .iter()
        .map(|item| match *item {
            CronItem::Range(a, b) => format!("{} to {}", name(a), name(b)),
            CronItem::Step(None, n) => format!("every {}", ordinal(n)),
            CronItem::Step(Some((a, b)), n) => {
                format!("every {} from {} to {}", ordinal(n), name(a), name(b))
            }
            CronItem::Value(v) => name(v),
            _ => "every".to_string(),
        })
        .collect();
    join(&words)
}
