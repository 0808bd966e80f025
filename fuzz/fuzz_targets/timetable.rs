//! Fuzz target: an arbitrary string as a schedule spec (cron, `@every`, `@at`, `@after`) in
//! a zone from a small list, then `Timetable::next_after` several times from an arbitrary
//! instant. Must never panic or hang, and every tick must be strictly after the previous.
//!
//! Input: `<zone index> <unix seconds> [<window seconds>]\n<spec>` (text; a missing or bad
//! number means 0, so any bytes are an input).
#![no_main]

use chrono::{DateTime, Utc};
use kairos_core::{DstFold, DstGap, Spec, Timetable, Tz};
use libfuzzer_sys::fuzz_target;

const ZONES: [Tz; 8] = [
    Tz::UTC,
    Tz::Europe__London,
    Tz::America__New_York,
    Tz::Australia__Lord_Howe,
    Tz::Asia__Kolkata,
    Tz::Pacific__Chatham,
    Tz::America__Santiago,
    Tz::Africa__Casablanca,
];

/// Instants the fuzzer may pick: 1900 to 2300, around the 1970–2199 horizon.
const MIN_S: i64 = -2_208_988_800;
const MAX_S: i64 = 10_413_792_000;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (head, spec_text) = text.split_once('\n').unwrap_or(("", &text));
    let mut numbers = head
        .split_whitespace()
        .map(|n| n.parse::<i64>().unwrap_or(0));
    let choice = numbers.next().unwrap_or(0);
    let start = numbers.next().unwrap_or(0).clamp(MIN_S, MAX_S);
    let window = numbers.next().unwrap_or(0);
    let Ok(spec) = Spec::parse(spec_text) else {
        return;
    };
    let zone = ZONES[choice.rem_euclid(ZONES.len() as i64) as usize];
    let at = |s: i64| DateTime::<Utc>::from_timestamp(s.clamp(MIN_S, MAX_S), 0).unwrap();
    let mut timetable = Timetable::new(spec, zone, at(start));
    // The higher bits pick a DST policy and a window, so those paths are fuzzed too.
    let gap = match (choice >> 3) & 3 {
        1 => Some(DstGap::Skip),
        2 => Some(DstGap::Shift),
        _ => None,
    };
    let fold = match (choice >> 5) & 3 {
        1 => Some(DstFold::First),
        2 => Some(DstFold::Both),
        _ => None,
    };
    timetable = timetable.dst(gap, fold);
    if window != 0 {
        let (a, b) = (at(start), at(start.saturating_add(window)));
        timetable = timetable.window(Some(a.min(b)), Some(a.max(b)));
    }
    let mut after = at(start);
    for _ in 0..8 {
        let Some(next) = timetable.next_after(after) else {
            break;
        };
        assert!(next > after, "{next} is not after {after} for {text:?}");
        after = next;
    }
});
