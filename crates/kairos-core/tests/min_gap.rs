//! `Timetable::min_gap`: the exact smallest gap a spec leaves between two ticks, with the
//! first pair that close, as wall times in the zone.

use chrono::{DateTime, Duration, NaiveDateTime, Utc};
use kairos_core::{parse_zone, Spec, Timetable};

fn ts(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("test timestamp")
        .with_timezone(&Utc)
}

fn wall(text: &str) -> NaiveDateTime {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S").expect("test wall time")
}

fn timetable(spec: &str, zone: &str, anchor: &str) -> Timetable {
    let spec = Spec::parse(spec).unwrap_or_else(|err| panic!("{spec}: {err}"));
    Timetable::new(spec, parse_zone(zone).expect("zone"), ts(anchor))
}

/// Gap in seconds, earlier and later wall time.
type Expected = Option<(i64, &'static str, &'static str)>;

/// `(spec, zone, from, expected)`.
#[test]
fn min_gap_table() {
    let monday_2026_03_09 = "2026-03-09T12:00:00Z";
    let cases: &[(&str, &str, &str, Expected)] = &[
        // The bug: the 50 -> 51 gap is the 7th tick of the day.
        (
            "0 0,10,20,30,40,50,51 0 * * *",
            "UTC",
            monday_2026_03_09,
            Some((60, "2026-03-10T00:50:00", "2026-03-10T00:51:00")),
        ),
        // Across midnight only when two consecutive days match.
        (
            "0 23,1 * * *",
            "UTC",
            monday_2026_03_09,
            Some((7_200, "2026-03-09T23:00:00", "2026-03-10T01:00:00")),
        ),
        (
            "0 23,1 * * MON",
            "UTC",
            monday_2026_03_09,
            Some((79_200, "2026-03-16T01:00:00", "2026-03-16T23:00:00")),
        ),
        // Sunday and Monday are consecutive: 23:00 Sunday -> 01:00 Monday.
        (
            "0 23,1 * * SUN,MON",
            "UTC",
            monday_2026_03_09,
            Some((7_200, "2026-03-15T23:00:00", "2026-03-16T01:00:00")),
        ),
        // 31st -> 1st of the next month, only after a 31-day month.
        (
            "0 22 1,31 * *",
            "UTC",
            monday_2026_03_09,
            Some((86_400, "2026-03-31T22:00:00", "2026-04-01T22:00:00")),
        ),
        // One time a day, every day.
        (
            "0 7 * * *",
            "America/New_York",
            monday_2026_03_09,
            Some((86_400, "2026-03-10T07:00:00", "2026-03-11T07:00:00")),
        ),
        // Seconds field: every 10 s; the first pair at or after "now" (08:00 local).
        (
            "*/10 * * * * *",
            "America/New_York",
            monday_2026_03_09,
            Some((10, "2026-03-09T08:00:00", "2026-03-09T08:00:10")),
        ),
        // Uneven minutes: 0, 7 and 59 past each hour -> 59 -> 0 of the next hour is 60 s.
        (
            "0,7,59 * * * *",
            "UTC",
            monday_2026_03_09,
            Some((60, "2026-03-09T12:59:00", "2026-03-09T13:00:00")),
        ),
        // The same from late in the day: the pair is found on the next day.
        (
            "0,7,59 1 * * *",
            "UTC",
            monday_2026_03_09,
            Some((420, "2026-03-10T01:00:00", "2026-03-10T01:07:00")),
        ),
        // Yearly: the gap follows the calendar (2027 is not a leap year).
        (
            "0 0 1 1 *",
            "UTC",
            monday_2026_03_09,
            Some((365 * 86_400, "2027-01-01T00:00:00", "2028-01-01T00:00:00")),
        ),
        // One wall time before the horizon: no gap at all.
        ("0 0 0 1 1 * 2030", "UTC", monday_2026_03_09, None),
        // @every: its period, from the first tick at or after `from` (anchor 00:00Z).
        (
            "@every 90s",
            "UTC",
            monday_2026_03_09,
            Some((90, "2026-03-09T12:00:00", "2026-03-09T12:01:30")),
        ),
        ("@at 2027-01-01T00:00:00Z", "UTC", monday_2026_03_09, None),
    ];
    for &(spec, zone, from, expected) in cases {
        let found = timetable(spec, zone, "2026-03-09T00:00:00Z").min_gap(ts(from));
        let found = found.map(|gap| (gap.gap, gap.earlier, gap.later));
        let expected =
            expected.map(|(seconds, a, b)| (Duration::seconds(seconds), wall(a), wall(b)));
        assert_eq!(found, expected, "{spec} in {zone} from {from}");
    }
}

/// The DST decision: gaps are wall-clock gaps. On 2026-03-08 New York springs forward,
/// so `0 1,3 * * *` fires one real hour apart that day; `min_gap` still says 2 h.
#[test]
fn dst_shortened_real_gaps_are_not_counted() {
    let table = timetable("0 1,3 * * *", "America/New_York", "2026-03-07T12:00:00Z");
    let ticks: Vec<_> = table
        .ticks_after(ts("2026-03-08T00:00:00Z"))
        .take(2)
        .collect();
    assert_eq!(
        ticks,
        [ts("2026-03-08T06:00:00Z"), ts("2026-03-08T07:00:00Z")]
    );
    let gap = table.min_gap(ts("2026-03-07T12:00:00Z")).expect("a gap");
    assert_eq!(gap.gap, Duration::hours(2));
    // Fall back (2026-11-01): a wildcard job restarts its minutes in the replayed hour;
    // 01:50 EDT -> 01:00 EST is 10 real minutes, the wall-clock minimum is 25 minutes.
    let table = timetable("*/25 1 * * *", "America/New_York", "2026-10-31T12:00:00Z");
    let ticks: Vec<_> = table
        .ticks_after(ts("2026-11-01T05:45:00Z"))
        .take(2)
        .collect();
    assert_eq!(
        ticks,
        [ts("2026-11-01T05:50:00Z"), ts("2026-11-01T06:00:00Z")]
    );
    let gap = table.min_gap(ts("2026-10-31T12:00:00Z")).expect("a gap");
    assert_eq!(gap.gap, Duration::minutes(25));
}

/// `min_gap_floor` never exceeds the exact gap (the registrar skips the search when the
/// floor already clears `min_interval`), and is exact when matching days are consecutive.
#[test]
fn the_floor_is_never_above_the_exact_gap() {
    let from = ts("2026-03-09T12:00:00Z");
    let cases: &[(&str, Option<i64>)] = &[
        ("0 0,10,20,30,40,50,51 0 * * *", Some(60)),
        ("0 23,1 * * *", Some(7_200)),
        // Mondays only: the floor assumes consecutive days (2 h); the exact gap is 22 h.
        ("0 23,1 * * MON", Some(7_200)),
        ("5 3 * * 2", Some(86_400)),
        ("0 0 1 1 *", Some(86_400)),
        ("*/10 * * * * *", Some(10)),
        ("0,7,59 * * * *", Some(60)),
        ("0 0 0 1 1 * 2030", Some(86_400)),
        ("@every 90s", Some(90)),
        ("@at 2027-01-01T00:00:00Z", None),
    ];
    for &(spec, floor) in cases {
        let table = timetable(spec, "Europe/Berlin", "2026-03-09T00:00:00Z");
        let found = table.min_gap_floor();
        assert_eq!(found, floor.map(Duration::seconds), "{spec}");
        if let (Some(found), Some(exact)) = (found, table.min_gap(from)) {
            assert!(
                found <= exact.gap,
                "{spec}: floor {found} above {}",
                exact.gap
            );
        }
    }
}
