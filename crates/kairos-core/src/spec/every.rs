//! The two non-cron specs: `@every <duration>` (fixed real-time spacing) and `@at <RFC3339>`.

use chrono::{DateTime, Datelike, Timelike, Utc};

use super::{SpecError, HORIZON_YEAR, MIN_YEAR};

/// Longest `@every` period accepted: ten years of seconds.
const MAX_EVERY_SECONDS: i64 = 3650 * 86_400;

/// Parses `90s`, `5m`, `1h30m`, `2d` into whole seconds (at least 1 s).
pub(super) fn parse_duration(text: &str) -> Result<i64, SpecError> {
    let err = |rule: &str| SpecError::Every {
        value: text.to_string(),
        rule: rule.to_string(),
    };
    if text.is_empty() {
        return Err(err("missing: write e.g. 30s, 5m, 1h30m or 2d"));
    }
    let mut total: i64 = 0;
    let mut digits = String::new();
    for ch in text.chars() {
        if ch.is_ascii_digit() {
            digits.push(ch);
            continue;
        }
        let unit = match ch {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            'd' => 86_400,
            _ => return Err(err("use whole numbers with units s, m, h, d (e.g. 1h30m)")),
        };
        let amount: i64 = digits
            .parse()
            .map_err(|_| err("each unit needs a whole number before it (e.g. 1h30m)"))?;
        digits.clear();
        total = amount
            .checked_mul(unit)
            .and_then(|part| total.checked_add(part))
            .filter(|t| *t <= MAX_EVERY_SECONDS)
            .ok_or_else(|| err("longer than the 3650d maximum"))?;
    }
    if !digits.is_empty() {
        return Err(err("the last number has no unit (s, m, h or d)"));
    }
    if total < 1 {
        return Err(err("must be at least 1s"));
    }
    Ok(total)
}

/// Parses the RFC 3339 instant of `@at`: whole seconds, years 1970–2199.
pub(super) fn parse_at(text: &str) -> Result<DateTime<Utc>, SpecError> {
    let err = |rule: &str| SpecError::At {
        value: text.to_string(),
        rule: rule.to_string(),
    };
    let at = DateTime::parse_from_rfc3339(text)
        .map_err(|_| err("not an RFC 3339 time with offset (e.g. 2026-03-09T07:00:00Z)"))?
        .with_timezone(&Utc);
    if at.nanosecond() != 0 {
        return Err(err(
            "must be whole seconds (ticks are keyed by epoch second)",
        ));
    }
    if !(MIN_YEAR..=HORIZON_YEAR).contains(&at.year()) {
        return Err(err("year must be within 1970-2199"));
    }
    Ok(at)
}
