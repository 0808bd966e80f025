//! A schedule's spec in words ("at 07:00, Monday to Friday"), for people reading the page.
//! Best effort: a form it does not know is described field by field, never refused (the
//! spec was validated when it was stored).

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

/// The spec in words, with the zone its wall times are in.
pub fn describe(spec: &str, zone: &str) -> String {
    let trimmed = spec.trim();
    let lower = trimmed.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("@every") {
        return format!(
            "every {} (counted from the start, not the wall clock)",
            rest.trim()
        );
    }
    if lower.starts_with("@at") {
        return format!("once, at {}", trimmed[3..].trim());
    }
    let expanded = match lower.as_str() {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        _ => trimmed,
    };
    let fields: Vec<&str> = expanded.split_whitespace().collect();
    let (second, rest) = match fields.len() {
        5 => ("0", &fields[..]),
        6 | 7 => (fields[0], &fields[1..6]),
        _ => return format!("{trimmed} (in {zone})"),
    };
    let time = time_words(second, rest[0], rest[1]);
    let days = day_words(rest[2], rest[3], rest[4]);
    format!("{time}, {days}, wall time in {zone}")
}

fn number(text: &str) -> Option<u32> {
    text.parse().ok()
}

fn time_words(second: &str, minute: &str, hour: &str) -> String {
    let sec = number(second);
    match (number(minute), number(hour)) {
        (Some(m), Some(h)) => match sec {
            Some(0) => format!("at {h:02}:{m:02}"),
            Some(s) => format!("at {h:02}:{m:02}:{s:02}"),
            None => format!("at {h:02}:{m:02}, seconds {}", list(second, &|v| v.into())),
        },
        (Some(m), None) if hour == "*" => format!("at minute {m} of every hour"),
        (Some(m), None) => format!("at minute {m} past hour {}", list(hour, &|v| v.into())),
        (None, _) if minute == "*" && hour == "*" && sec == Some(0) => "every minute".into(),
        (None, _) if hour == "*" => match minute.strip_prefix("*/") {
            Some(step) => format!("every {step} minutes"),
            None => format!("at minutes {} of every hour", list(minute, &|v| v.into())),
        },
        _ => format!(
            "at minutes {} past hours {}",
            list(minute, &|v| v.into()),
            list(hour, &|v| v.into())
        ),
    }
}

fn day_words(dom: &str, month: &str, dow: &str) -> String {
    let any = |f: &str| f == "*" || f == "?";
    let day_name = |v: &str| {
        number(v)
            .and_then(|n| DAYS.get(n as usize))
            .map_or_else(|| v.to_string(), |d| (*d).to_string())
    };
    let month_name = |v: &str| {
        number(v)
            .and_then(|n| MONTHS.get((n as usize).wrapping_sub(1)))
            .map_or_else(|| v.to_string(), |m| (*m).to_string())
    };
    let mut words = match (any(dom), any(dow)) {
        (true, true) => "every day".to_string(),
        (true, false) => format!("on {}", list(dow, &day_name)),
        (false, true) => format!("on day {} of the month", list(dom, &|v| v.into())),
        (false, false) => format!(
            "on day {} of the month or on {}",
            list(dom, &|v| v.into()),
            list(dow, &day_name)
        ),
    };
    if !any(month) {
        words.push_str(&format!(" in {}", list(month, &month_name)));
    }
    words
}

/// A cron field's list, ranges and steps in words, each value named by `name`.
fn list(field: &str, name: &dyn Fn(&str) -> String) -> String {
    let parts: Vec<String> = field
        .split(',')
        .map(|part| {
            let (range, step) = match part.split_once('/') {
                Some((range, step)) => (range, Some(step)),
                None => (part, None),
            };
            let range = match range.split_once('-') {
                Some((a, b)) => format!("{} to {}", name(a), name(b)),
                None if range == "*" => "every".to_string(),
                None => name(range),
            };
            match step {
                Some(step) => format!("{range}, every {step}"),
                None => range,
            }
        })
        .collect();
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::describe;

    #[test]
    fn common_specs_read_as_sentences() {
        let ny = "America/New_York";
        assert_eq!(
            describe("0 7 * * *", ny),
            "at 07:00, every day, wall time in America/New_York"
        );
        assert_eq!(
            describe("30 9 * * 1-5", "UTC"),
            "at 09:30, on Monday to Friday, wall time in UTC"
        );
        assert_eq!(
            describe("*/15 * * * *", "UTC"),
            "every 15 minutes, every day, wall time in UTC"
        );
        assert_eq!(
            describe("0 0 1 1 *", "UTC"),
            "at 00:00, on day 1 of the month in January, wall time in UTC"
        );
        assert_eq!(
            describe("@every 90s", "UTC"),
            "every 90s (counted from the start, not the wall clock)"
        );
        assert_eq!(
            describe("@hourly", "UTC"),
            "at minute 0 of every hour, every day, wall time in UTC"
        );
    }
}
