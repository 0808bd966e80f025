//! Real zones and their real transitions, shared by the DST and calendar property tests.

#![allow(dead_code)]

use std::str::FromStr;

use chrono::{DateTime, Duration, Offset, TimeZone, Utc};
use chrono_tz::Tz;

/// Zones with unusual transitions: midnight gaps (Havana), 30-minute shifts (Lord Howe),
/// negative DST (Dublin), a skipped day (Apia), 2-hour shifts (Troll), frequent changes
/// (Casablanca), and zones without DST.
pub const ZONES: &[&str] = &[
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "Pacific/Apia",
    "America/Havana",
    "Europe/Dublin",
    "Antarctica/Troll",
    "Africa/Casablanca",
    "America/Santiago",
    "Asia/Gaza",
    "Pacific/Chatham",
    "America/St_Johns",
    "Europe/Moscow",
    "Asia/Tehran",
    "America/Sao_Paulo",
    "Australia/Adelaide",
    "Asia/Kolkata",
    "UTC",
];

pub fn zone(name: &str) -> Tz {
    Tz::from_str(name).expect("zone")
}

pub fn offset_at(tz: Tz, at: DateTime<Utc>) -> i32 {
    tz.offset_from_utc_datetime(&at.naive_utc())
        .fix()
        .local_minus_utc()
}

/// Transition instants of `tz` in `year`, found by hourly probes then minute refinement.
pub fn transitions(tz: Tz, year: i32) -> Vec<DateTime<Utc>> {
    let start = Utc
        .with_ymd_and_hms(year, 1, 1, 0, 0, 0)
        .single()
        .expect("date");
    let mut found = Vec::new();
    let mut prev = offset_at(tz, start);
    for hour in 1..(366 * 24) {
        let at = start + Duration::hours(hour);
        let now = offset_at(tz, at);
        if now != prev {
            let mut t = at - Duration::hours(1);
            while offset_at(tz, t) == prev {
                t += Duration::minutes(1);
            }
            found.push(t);
            prev = now;
        }
    }
    found
}
