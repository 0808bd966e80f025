//! Times as the page shows them: always with their zone, in the schedule's zone and in UTC,
//! each said once (a UTC schedule's times are not repeated, nor is `UTC` named twice).

use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use maud::{html, Markup};

/// Zone names that are UTC itself: their times are shown once, in the UTC form.
const UTC_NAMES: [&str; 8] = [
    "UTC",
    "Etc/UTC",
    "Etc/UCT",
    "UCT",
    "Etc/Universal",
    "Universal",
    "Etc/Zulu",
    "Zulu",
];

/// Whether `zone` is UTC itself (its times need no second, UTC line).
pub fn is_utc(zone: &str) -> bool {
    UTC_NAMES.contains(&zone)
}

/// `2026-03-09 07:00:00 EDT (America/New_York)`; the UTC form when the zone is UTC or
/// unknown.
pub fn in_zone(at: DateTime<Utc>, zone: &str) -> String {
    match zone.parse::<Tz>() {
        Ok(_) if is_utc(zone) => utc(at),
        Ok(tz) => format!(
            "{} ({zone})",
            at.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S %Z")
        ),
        Err(_) => utc(at),
    }
}

/// [`in_zone`] for a place where the line may wrap: the time and the `(zone)` each kept
/// whole, a break allowed only between them.
pub fn zoned(at: DateTime<Utc>, zone: &str) -> Markup {
    let text = in_zone(at, zone);
    match text.split_once(" (") {
        Some((time, zone)) => html! { span.nowrap { (time) } " " span.nowrap { "(" (zone) } },
        None => html! { span.nowrap { (text) } },
    }
}

/// `2026-03-09 11:00:00 UTC`.
pub fn utc(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// `2026-03-09T11:00:00Z`, for `datetime` attributes and API bodies.
pub fn rfc3339(at: DateTime<Utc>) -> String {
    kairos_registrar::rfc3339(at)
}

/// A span as `2d 3h`, `4h 5m`, `6m 7s` or `8s` (negative spans as `0s`).
pub fn span(span: Duration) -> String {
    let total = span.num_seconds().max(0);
    let (days, hours, minutes, seconds) = (
        total / 86_400,
        total % 86_400 / 3_600,
        total % 3_600 / 60,
        total % 60,
    );
    if days > 0 {
        format!("{days}d {hours}h")
    } else if hours > 0 {
        format!("{hours}h {minutes}m")
    } else if minutes > 0 {
        format!("{minutes}m {seconds}s")
    } else {
        format!("{seconds}s")
    }
}

/// `in 4h 5m` or `6m 7s ago`, relative to `now`.
pub fn relative(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    if at >= now {
        format!("in {}", span(at - now))
    } else {
        format!("{} ago", span(now - at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("time")
            .with_timezone(&Utc)
    }

    #[test]
    fn times_name_their_zone() {
        let tick = at("2026-03-09T11:00:00Z");
        assert_eq!(
            in_zone(tick, "America/New_York"),
            "2026-03-09 07:00:00 EDT (America/New_York)"
        );
        assert_eq!(utc(tick), "2026-03-09 11:00:00 UTC");
        assert_eq!(in_zone(tick, "Not/AZone"), "2026-03-09 11:00:00 UTC");
        // Said once: not "2026-03-09 11:00:00 UTC (UTC)".
        assert_eq!(in_zone(tick, "UTC"), "2026-03-09 11:00:00 UTC");
        assert_eq!(in_zone(tick, "Etc/UTC"), "2026-03-09 11:00:00 UTC");
        assert!(is_utc("UTC") && !is_utc("Europe/London"));
    }

    #[test]
    fn zoned_times_break_only_before_the_zone() {
        let tick = at("2026-03-09T11:00:00Z");
        assert_eq!(
            zoned(tick, "America/New_York").into_string(),
            r#"<span class="nowrap">2026-03-09 07:00:00 EDT</span> <span class="nowrap">(America/New_York)</span>"#
        );
        assert_eq!(
            zoned(tick, "UTC").into_string(),
            r#"<span class="nowrap">2026-03-09 11:00:00 UTC</span>"#
        );
    }

    #[test]
    fn spans_are_short() {
        let now = at("2026-03-09T11:00:00Z");
        assert_eq!(relative(at("2026-03-09T15:05:00Z"), now), "in 4h 5m");
        assert_eq!(relative(at("2026-03-09T10:53:53Z"), now), "6m 7s ago");
        assert_eq!(span(Duration::days(2) + Duration::hours(3)), "2d 3h");
    }
}
