//! Property tests around DST transitions (docs/design.md §4 rules 3, 5, 6, 7).
//!
//! The strongest check compares `Timetable` with a brute-force oracle that states the rules
//! directly: walk every minute of a window around a real transition of a real zone and
//! decide, minute by minute, what must fire.

use crate::zones;

use std::collections::{BTreeSet, HashMap};
use std::str::FromStr;
use std::time::{Duration as StdDuration, Instant};

use chrono::{DateTime, Datelike, Duration, LocalResult, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use kairos_core::{JobKind, Spec, Timetable};
use proptest::prelude::*;
use zones::{transitions, zone, ZONES};

/// Minute-resolution 5-field expressions: single values, lists, ranges and steps.
fn expr_strategy() -> impl Strategy<Value = String> {
    let minute = prop_oneof![
        Just("*".to_string()),
        (0u32..60).prop_map(|m| m.to_string()),
        prop::sample::select(vec![5u32, 7, 15, 20, 30]).prop_map(|n| format!("*/{n}")),
        (0u32..30, 30u32..60).prop_map(|(a, b)| format!("{a},{b}")),
        (0u32..30, 30u32..60).prop_map(|(a, b)| format!("{a}-{b}/10")),
    ];
    let hour = prop_oneof![
        Just("*".to_string()),
        (0u32..24).prop_map(|h| h.to_string()),
        prop::sample::select(vec![2u32, 3, 5]).prop_map(|n| format!("*/{n}")),
        (0u32..4, 12u32..24).prop_map(|(a, b)| format!("{a},{b}")),
        (0u32..3, 1u32..4).prop_map(|(a, len)| format!("{a}-{}", a + len)),
    ];
    let dow = prop_oneof![4 => Just("*"), 1 => Just("1-5"), 1 => Just("0,6")];
    (minute, hour, dow).prop_map(|(m, h, d)| format!("{m} {h} * * {d}"))
}

/// What must fire in `[from, to]`, stated minute by minute from the rules.
fn oracle(
    expr: &str,
    kind: JobKind,
    tz: Tz,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> BTreeSet<i64> {
    let cron = Cron::from_str(expr).expect("croner parses generated exprs");
    let matches =
        |wall: chrono::NaiveDateTime| cron.is_time_matching(&wall.and_utc()).expect("match");
    let minutes = (to - from).num_minutes();
    let instants: Vec<DateTime<Utc>> = (0..=minutes).map(|m| from + Duration::minutes(m)).collect();
    let local = |at: DateTime<Utc>| at.with_timezone(&tz).naive_local();
    let mut ticks = BTreeSet::new();
    match kind {
        // Rule 5/6 for wildcard jobs: every real instant whose wall time matches.
        JobKind::Wildcard => {
            for at in &instants {
                if matches(local(*at)) {
                    ticks.insert(at.timestamp());
                }
            }
        }
        // Fixed-time: each matching wall time once; overlap → first; gap → the jump, if on
        // the same local date.
        JobKind::FixedTime => {
            let first_date = local(from).date() - Duration::days(1);
            let last_date = local(to).date() + Duration::days(1);
            let mut date = first_date;
            while date <= last_date {
                for minute in 0..1440 {
                    let wall =
                        date.and_hms_opt(0, 0, 0).expect("midnight") + Duration::minutes(minute);
                    if !matches(wall) {
                        continue;
                    }
                    match tz.from_local_datetime(&wall) {
                        LocalResult::Single(at) => {
                            ticks.insert(at.timestamp());
                        }
                        LocalResult::Ambiguous(first, _) => {
                            ticks.insert(first.timestamp());
                        }
                        LocalResult::None => {
                            let jump = instants
                                .windows(2)
                                .find(|pair| local(pair[0]) < wall && local(pair[1]) > wall)
                                .map(|pair| pair[1]);
                            if let Some(jump) = jump {
                                if local(jump).date() == wall.date() {
                                    ticks.insert(jump.timestamp());
                                }
                            }
                        }
                    }
                }
                date = date.succ_opt().expect("date");
            }
        }
    }
    ticks.retain(|t| *t >= from.timestamp() && *t <= to.timestamp());
    ticks
}

fn ours(timetable: &Timetable, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<i64> {
    timetable
        .ticks_after(from - Duration::seconds(1))
        .take_while(|t| *t <= to)
        .map(|t| t.timestamp())
        .collect()
}

/// The local dates of `year` on which a fixed-time job at `hour:minute` has a tick (rule 5):
/// the wall time exists, or it falls in a gap whose end (the instant the clocks jumped) is on
/// the same local date. A gap that runs past midnight (Asia/Tehran, 1977-03-21 at 23:00) or
/// a skipped day (Pacific/Apia, 2011-12-30) leaves that date without a tick.
fn dates_with_a_tick(tz: Tz, year: i32, hour: u32, minute: u32) -> usize {
    let mut date = NaiveDate::from_ymd_opt(year, 1, 1).expect("new year");
    let mut count = 0;
    while date.year() == year {
        let wall = date.and_hms_opt(hour, minute, 0).expect("valid wall time");
        let exists = tz.from_local_datetime(&wall).earliest().is_some();
        let gap_ends_same_day = || {
            (1..=26 * 60)
                .map(|m| wall + Duration::minutes(m))
                .find(|later| tz.from_local_datetime(later).earliest().is_some())
                .is_some_and(|end| end.date() == date)
        };
        if exists || gap_ends_same_day() {
            count += 1;
        }
        date = date.succ_opt().expect("next date");
    }
    count
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Ticks equal the oracle in a 2.5-day window around a real transition of the zone.
    #[test]
    fn ticks_match_the_rules_around_transitions(
        expr in expr_strategy(),
        zone_name in prop::sample::select(ZONES),
        year in 1990i32..2060,
        pick in any::<prop::sample::Index>(),
    ) {
        let tz = zone(zone_name);
        let spec = Spec::parse(&expr).expect("generated exprs are valid");
        let kind = spec.job_kind().expect("cron");
        let found = transitions(tz, year);
        let center = if found.is_empty() {
            Utc.with_ymd_and_hms(year, 3, 1, 0, 0, 0).single().expect("date")
        } else {
            found[pick.index(found.len())]
        };
        let from = center - Duration::hours(30);
        let to = center + Duration::hours(30);
        let timetable = Timetable::new(spec, tz, from);
        let got = ours(&timetable, from, to);
        let expected: Vec<i64> = oracle(&expr, kind, tz, from, to).into_iter().collect();
        prop_assert_eq!(got, expected, "{} in {} around {}", expr, zone_name, center);
    }

    /// A fixed-time job with one time of day fires at most once per local date, and on
    /// every local date of a year that exists (a skipped day, as in Apia 2011, has none).
    #[test]
    fn fixed_time_fires_at_most_once_per_local_date(
        minute in 0u32..60,
        hour in 0u32..24,
        zone_name in prop::sample::select(ZONES),
        year in 1971i32..2150,
    ) {
        let tz = zone(zone_name);
        let spec = Spec::parse(&format!("{minute} {hour} * * *")).expect("valid");
        let from = tz.with_ymd_and_hms(year, 1, 1, 0, 0, 0).earliest().expect("new year exists")
            .with_timezone(&Utc) - Duration::seconds(1);
        let timetable = Timetable::new(spec, tz, from);
        let mut per_date: HashMap<NaiveDate, u32> = HashMap::new();
        for tick in timetable.ticks_after(from) {
            let date = tick.with_timezone(&tz).date_naive();
            if date.year() != year {
                break;
            }
            *per_date.entry(date).or_default() += 1;
        }
        prop_assert!(per_date.values().all(|n| *n == 1), "{:?}", per_date.iter().find(|(_, n)| **n > 1));
        let expected = dates_with_a_tick(tz, year, hour, minute);
        prop_assert_eq!(per_date.len(), expected, "{} {:02}:{:02} in {}", zone_name, hour, minute, year);
    }

    /// Any valid expression in any zone: ticks strictly increase (no instant twice), start
    /// strictly after `after`, and every evaluation returns promptly (never a hang).
    #[test]
    fn ticks_strictly_increase_and_return_promptly(
        expr in prop_oneof![
            expr_strategy(),
            Just("*/7 * * * * *".to_string()),
            Just("0 0 0 29 2 *".to_string()),
            Just("0 0 31 * +FRI".to_string()),
            Just("0 0 LW * *".to_string()),
            Just("0 30 2 * * 0#L".to_string()),
            Just("0 0 0 1 1 * 2199".to_string()),
        ],
        zone_index in any::<prop::sample::Index>(),
        after_s in 0i64..7_258_118_400, // 1970 .. 2200
    ) {
        let tz = chrono_tz::TZ_VARIANTS[zone_index.index(chrono_tz::TZ_VARIANTS.len())];
        let spec = Spec::parse(&expr).expect("valid");
        let after = DateTime::from_timestamp(after_s, 0).expect("instant");
        let timetable = Timetable::new(spec, tz, after);
        let mut last = after;
        for _ in 0..12 {
            let started = Instant::now();
            let next = timetable.next_after(last);
            prop_assert!(started.elapsed() < StdDuration::from_secs(2), "{} in {} after {} hung", expr, tz, last);
            match next {
                Some(next) => {
                    prop_assert!(next > last, "{} in {}: {} not after {}", expr, tz, next, last);
                    last = next;
                }
                None => break,
            }
        }
    }
}
