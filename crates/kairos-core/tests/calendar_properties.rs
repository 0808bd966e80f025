//! Property tests of exclusions, rolling and per-schedule DST policy against brute-force
//! oracles that state the rules directly (as `dst_properties.rs` does for docs/design.md §4):
//!
//! - DST policy: walk every minute of every local date around a real transition of a real
//!   zone (18 zones, Lord Howe's 30-minute shift and Havana's midnight jump among them) and
//!   map each matching wall time to instants by the chosen `dst_gap`/`dst_fold`.
//! - Exclusions: the ticks are exactly the unexcluded ticks whose wall time is not
//!   excluded; none falls on an excluded date.
//! - Rolling: every matching wall time on an excluded date moves to the same time on the
//!   nearest free date; the ticks are those wall times, mapped by the DST rules. Never on
//!   an excluded date, strictly increasing, at most one per original wall time.

use crate::zones;

use std::collections::BTreeSet;
use std::str::FromStr;

use chrono::{DateTime, Datelike, Duration, LocalResult, NaiveDate, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use kairos_core::{DstFold, DstGap, Exclusion, Exclusions, JobKind, Roll, Spec, Timetable};
use proptest::prelude::*;
use zones::{transitions, zone, ZONES};

fn expr_strategy() -> impl Strategy<Value = String> {
    let minute = prop_oneof![
        Just("*".to_string()),
        (0u32..60).prop_map(|m| m.to_string()),
        prop::sample::select(vec![7u32, 15, 30]).prop_map(|n| format!("*/{n}")),
        (0u32..30, 30u32..60).prop_map(|(a, b)| format!("{a},{b}")),
    ];
    let hour = prop_oneof![
        Just("*".to_string()),
        (0u32..24).prop_map(|h| h.to_string()),
        prop::sample::select(vec![2u32, 5]).prop_map(|n| format!("*/{n}")),
        (0u32..3, 1u32..4).prop_map(|(a, len)| format!("{a}-{}", a + len)),
    ];
    let days = prop_oneof![4 => Just("* * *"), 1 => Just("* * 1-5"), 1 => Just("1,15 * *"), 1 => Just("L * *")];
    (minute, hour, days).prop_map(|(m, h, d)| format!("{m} {h} {d}"))
}

fn gap_strategy() -> impl Strategy<Value = Option<DstGap>> {
    prop_oneof![
        Just(None),
        Just(Some(DstGap::Shift)),
        Just(Some(DstGap::Skip))
    ]
}

fn fold_strategy() -> impl Strategy<Value = Option<DstFold>> {
    prop_oneof![
        Just(None),
        Just(Some(DstFold::First)),
        Just(Some(DstFold::Last)),
        Just(Some(DstFold::Both))
    ]
}

/// The policy in force: the schedule's, else docs/design.md §4's for the job's kind.
fn policy(kind: JobKind, gap: Option<DstGap>, fold: Option<DstFold>) -> (DstGap, DstFold) {
    match kind {
        JobKind::FixedTime => (gap.unwrap_or(DstGap::Shift), fold.unwrap_or(DstFold::First)),
        JobKind::Wildcard => (gap.unwrap_or(DstGap::Skip), fold.unwrap_or(DstFold::Both)),
    }
}

/// The instants of one wall time under the policy, stated from the definitions.
fn instants_of(tz: Tz, wall: NaiveDateTime, gap: DstGap, fold: DstFold) -> Vec<i64> {
    match tz.from_local_datetime(&wall) {
        LocalResult::Single(at) => vec![at.timestamp()],
        LocalResult::Ambiguous(first, second) => match fold {
            DstFold::First => vec![first.timestamp()],
            DstFold::Last => vec![second.timestamp()],
            DstFold::Both => vec![first.timestamp(), second.timestamp()],
        },
        LocalResult::None if gap == DstGap::Skip => Vec::new(),
        LocalResult::None => {
            // The clocks jumped to the first existing wall time after this one; real gaps
            // begin and end on whole minutes.
            let mut later = wall;
            loop {
                later += Duration::minutes(1);
                if let Some(at) = tz.from_local_datetime(&later).earliest() {
                    let jump = at.timestamp();
                    return if later.date() == wall.date() {
                        vec![jump]
                    } else {
                        Vec::new()
                    };
                }
            }
        }
    }
}

/// Every matching wall time (minute resolution) on each local date in `dates`.
fn matching_walls(expr: &str, dates: impl Iterator<Item = NaiveDate>) -> Vec<NaiveDateTime> {
    let cron = Cron::from_str(expr).expect("croner parses generated exprs");
    let mut walls = Vec::new();
    for date in dates {
        for minute in 0..1440 {
            let wall = date.and_hms_opt(0, 0, 0).expect("midnight") + Duration::minutes(minute);
            if cron.is_time_matching(&wall.and_utc()).expect("match") {
                walls.push(wall);
            }
        }
    }
    walls
}

fn dates_between(first: NaiveDate, last: NaiveDate) -> impl Iterator<Item = NaiveDate> {
    first.iter_days().take_while(move |d| *d <= last)
}

fn ours(timetable: &Timetable, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<i64> {
    timetable
        .ticks_after(from - Duration::seconds(1))
        .take_while(|t| *t <= to)
        .map(|t| t.timestamp())
        .collect()
}

fn local_date(tz: Tz, seconds: i64) -> NaiveDate {
    DateTime::from_timestamp(seconds, 0)
        .expect("instant")
        .with_timezone(&tz)
        .date_naive()
}

/// Random excluded dates in a window, plus optionally excluded weekdays (at most three, so
/// every run of excluded dates is short).
fn exclusion_strategy() -> impl Strategy<Value = (Vec<u32>, Vec<u32>)> {
    (
        prop::collection::vec(0u32..40, 0..8),
        prop::collection::btree_set(0u32..7, 0..3).prop_map(|s| s.into_iter().collect()),
    )
}

fn build_exclusions(
    start: NaiveDate,
    offsets: &[u32],
    weekdays: &[u32],
) -> (Exclusions, impl Fn(NaiveDate) -> bool) {
    let dates: BTreeSet<NaiveDate> = offsets
        .iter()
        .map(|o| start + Duration::days(i64::from(*o)))
        .collect();
    let mut entries: Vec<Exclusion> = dates
        .iter()
        .map(|d| Exclusion::parse(&d.to_string()).expect("date entry"))
        .collect();
    if !weekdays.is_empty() {
        let list: Vec<String> = weekdays.iter().map(u32::to_string).collect();
        entries.push(Exclusion::parse(&format!("* * * * {}", list.join(","))).expect("cron"));
    }
    let weekdays = weekdays.to_vec();
    let excluded = move |date: NaiveDate| {
        dates.contains(&date) || weekdays.contains(&date.weekday().num_days_from_sunday())
    };
    (Exclusions::new(entries, Vec::new()), excluded)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// With any `dst_gap`/`dst_fold` (or none), ticks equal the oracle in a 2.5-day window
    /// around a real transition of each of 18 zones.
    #[test]
    fn dst_policies_match_the_oracle(
        expr in expr_strategy(),
        zone_name in prop::sample::select(ZONES),
        year in 1995i32..2050,
        pick in any::<prop::sample::Index>(),
        gap in gap_strategy(),
        fold in fold_strategy(),
    ) {
        let tz = zone(zone_name);
        let spec = Spec::parse(&expr).expect("valid");
        let kind = spec.job_kind().expect("cron");
        let found = transitions(tz, year);
        let center = if found.is_empty() {
            Utc.with_ymd_and_hms(year, 3, 1, 0, 0, 0).single().expect("date")
        } else {
            found[pick.index(found.len())]
        };
        let (from, to) = (center - Duration::hours(30), center + Duration::hours(30));
        let timetable = Timetable::new(spec, tz, from).dst(gap, fold);
        let (gap_rule, fold_rule) = policy(kind, gap, fold);
        let local = |at: DateTime<Utc>| at.with_timezone(&tz).date_naive();
        let walls = matching_walls(&expr, dates_between(local(from) - Duration::days(1), local(to) + Duration::days(1)));
        let expected: BTreeSet<i64> = walls
            .into_iter()
            .flat_map(|wall| instants_of(tz, wall, gap_rule, fold_rule))
            .filter(|t| *t >= from.timestamp() && *t <= to.timestamp())
            .collect();
        let got = ours(&timetable, from, to);
        prop_assert_eq!(got, expected.into_iter().collect::<Vec<_>>(),
            "{} in {} around {} gap {:?} fold {:?}", expr, zone_name, center, gap, fold);
    }

    /// Exclusions remove exactly the ticks whose wall time they exclude; no tick falls on an
    /// excluded date.
    #[test]
    fn exclusions_remove_exactly_the_excluded_ticks(
        expr in expr_strategy(),
        zone_name in prop::sample::select(ZONES),
        start_day in 0i64..20_000,
        (offsets, weekdays) in exclusion_strategy(),
        time_entry in prop::option::of((0u32..24).prop_map(|h| format!("* {h} * * *"))),
    ) {
        let tz = zone(zone_name);
        let start = NaiveDate::from_ymd_opt(1990, 1, 1).expect("date") + Duration::days(start_day);
        let (mut exclusions, date_excluded) = build_exclusions(start, &offsets, &weekdays);
        if let Some(entry) = &time_entry {
            let mut entries = vec![Exclusion::parse(entry).expect("time entry")];
            // Rebuild with the extra time-of-day entry.
            for offset in &offsets {
                let date = start + Duration::days(i64::from(*offset));
                entries.push(Exclusion::parse(&date.to_string()).expect("date"));
            }
            if !weekdays.is_empty() {
                let list: Vec<String> = weekdays.iter().map(u32::to_string).collect();
                entries.push(Exclusion::parse(&format!("* * * * {}", list.join(","))).expect("cron"));
            }
            exclusions = Exclusions::new(entries, Vec::new());
        }
        let from = tz.from_local_datetime(&start.and_hms_opt(12, 0, 0).expect("noon")).earliest()
            .map_or_else(|| start.and_hms_opt(12, 0, 0).expect("noon").and_utc(), |t| t.with_timezone(&Utc));
        let to = from + Duration::days(42);
        let spec = Spec::parse(&expr).expect("valid");
        let plain = Timetable::new(spec.clone(), tz, from);
        let excluded = Timetable::new(spec, tz, from).exclude(exclusions.clone());
        let got = ours(&excluded, from, to);
        let expected: Vec<i64> = ours(&plain, from, to)
            .into_iter()
            .filter(|t| {
                let wall = DateTime::from_timestamp(*t, 0).expect("instant").with_timezone(&tz).naive_local();
                exclusions.excludes(wall).is_none()
            })
            .collect();
        prop_assert_eq!(&got, &expected, "{} in {} from {}", expr, zone_name, from);
        for tick in &got {
            prop_assert!(!date_excluded(local_date(tz, *tick)), "tick {} on an excluded date", tick);
        }
    }

    /// Rolling moves each matching wall time on an excluded date to the nearest free date
    /// (same time), collapsing equal ones; the result equals that oracle, never lands on an
    /// excluded date, strictly increases, and has at most one tick per original wall time.
    #[test]
    fn rolling_matches_the_oracle(
        expr in expr_strategy(),
        zone_name in prop::sample::select(ZONES),
        start_day in 0i64..20_000,
        (offsets, weekdays) in exclusion_strategy(),
        forward in any::<bool>(),
        gap in gap_strategy(),
        fold in fold_strategy(),
    ) {
        let tz = zone(zone_name);
        let start = NaiveDate::from_ymd_opt(1990, 1, 1).expect("date") + Duration::days(start_day);
        let (exclusions, excluded) = build_exclusions(start, &offsets, &weekdays);
        let roll = if forward { Roll::Forward } else { Roll::Backward };
        let spec = Spec::parse(&expr).expect("valid");
        let kind = spec.job_kind().expect("cron");
        let (gap_rule, fold_rule) = policy(kind, gap, fold);
        let window_start = start + Duration::days(5);
        let from = window_start.and_hms_opt(0, 0, 0).expect("midnight").and_utc();
        let to = from + Duration::days(30);
        let timetable = Timetable::new(spec, tz, from).exclude(exclusions).roll(roll).dst(gap, fold);

        // Oracle: matching walls well around the window, each moved to its free date.
        let margin = Duration::days(20);
        let walls = matching_walls(&expr, dates_between(window_start - margin, window_start + Duration::days(30) + margin));
        let n_original = walls.len();
        let step = if forward { 1 } else { -1 };
        let moved: BTreeSet<NaiveDateTime> = walls
            .into_iter()
            .filter_map(|wall| {
                let date = (0..=366)
                    .map(|n| wall.date() + Duration::days(n * step))
                    .find(|d| !excluded(*d))?;
                Some(date.and_time(wall.time()))
            })
            .collect();
        prop_assert!(moved.len() <= n_original);
        let expected: BTreeSet<i64> = moved
            .into_iter()
            .flat_map(|wall| instants_of(tz, wall, gap_rule, fold_rule))
            .filter(|t| *t >= from.timestamp() && *t <= to.timestamp())
            .collect();
        let got = ours(&timetable, from, to);
        prop_assert_eq!(&got, &expected.into_iter().collect::<Vec<_>>(),
            "{} in {} from {} roll {:?}", expr, zone_name, from, roll);
        prop_assert!(got.windows(2).all(|pair| pair[0] < pair[1]));
        for tick in &got {
            prop_assert!(!excluded(local_date(tz, *tick)), "tick {} on an excluded date", tick);
        }
    }
}
