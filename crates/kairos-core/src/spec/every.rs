//! The two non-cron specs: `@every <duration>` (fixed real-time spacing) and `@at <RFC3339>`.

use chrono::{DateTime, Datelike, FixedOffset, Timelike};

use super::{SpecError, HORIZON_YEAR, MIN_YEAR};

/// Longest `@every` period accepted: ten years of seconds.
const MAX_EVERY_SECONDS: i64 = 3650 * 86_400;

/// The unit of one part of an `@every` duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EveryUnit {
    /// `s`.
    Second,
    /// `m`.
    Minute,
    /// `h`.
    Hour,
    /// `d`: 86,400 seconds (a fixed span, not a calendar day).
    Day,
}

impl EveryUnit {
    /// The unit in seconds.
    pub fn seconds(self) -> i64 {
        match self {
            EveryUnit::Second => 1,
            EveryUnit::Minute => 60,
            EveryUnit::Hour => 3_600,
            EveryUnit::Day => 86_400,
        }
    }
}

/// One part of an `@every` duration as written: `30m` is 30 minutes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EveryPart {
    /// The number before the unit.
    pub amount: i64,
    /// The unit.
    pub unit: EveryUnit,
}

/// The whole duration of `parts` in seconds.
pub(super) fn total_seconds(parts: &[EveryPart]) -> i64 {
    parts
        .iter()
        .map(|part| part.amount * part.unit.seconds())
        .sum()
}

/// Reads `90s`, `5m`, `1h30m`, `2d` into its parts, checking that the whole is at least 1 s
/// and at most the maximum.
pub(super) fn parse_duration(text: &str) -> Result<Vec<EveryPart>, SpecError> {
    let err = |rule: &str| SpecError::Every {
        value: text.to_string(),
        rule: rule.to_string(),
    };
    if text.is_empty() {
        return Err(err("missing: write e.g. 30s, 5m, 1h30m or 2d"));
    }
    let mut total: i64 = 0;
    let mut parts = Vec::new();
    let mut digits = String::new();
    for ch in text.chars() {
        if ch.is_ascii_digit() {
            digits.push(ch);
            continue;
        }
        let unit = match ch {
            's' => EveryUnit::Second,
            'm' => EveryUnit::Minute,
            'h' => EveryUnit::Hour,
            'd' => EveryUnit::Day,
            _ => return Err(err("use whole numbers with units s, m, h, d (e.g. 1h30m)")),
        };
        let amount: i64 = digits
            .parse()
            .map_err(|_| err("each unit needs a whole number before it (e.g. 1h30m)"))?;
        digits.clear();
        total = amount
            .checked_mul(unit.seconds())
            .and_then(|part| total.checked_add(part))
            .filter(|t| *t <= MAX_EVERY_SECONDS)
            .ok_or_else(|| err("longer than the 3650d maximum"))?;
        parts.push(EveryPart { amount, unit });
    }
    if !digits.is_empty() {
        return Err(err("the last number has no unit (s, m, h or d)"));
    }
    if total < 1 {
        return Err(err("must be at least 1s"));
    }
    Ok(parts)
}

/// Parses the RFC 3339 instant of `@at`, keeping its offset: whole seconds, years 1970–2199
/// (in UTC).
pub(super) fn parse_at(text: &str) -> Result<DateTime<FixedOffset>, SpecError> {
    let err = |rule: &str| SpecError::At {
        value: text.to_string(),
        rule: rule.to_string(),
    };
    let at = DateTime::parse_from_rfc3339(text)
        .map_err(|_| err("not an RFC 3339 time with offset (e.g. 2026-03-09T07:00:00Z)"))?;
    if at.nanosecond() != 0 {
        return Err(err(
            "must be whole seconds (ticks are keyed by epoch second)",
        ));
    }
    if !(MIN_YEAR..=HORIZON_YEAR).contains(&at.to_utc().year()) {
        return Err(err("year must be within 1970-2199"));
    }
    Ok(at)
}
