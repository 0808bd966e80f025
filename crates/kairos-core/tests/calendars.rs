//! Table tests of the calendar rules that are not tick sequences: parsing exclusions and
//! calendars (each refusal by kind), the excluded-time listing and the per-tick notes of a
//! preview. Tick sequences per rule are in `calendar_vectors.rs`.

use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use kairos_core::{
    parse_date, parse_zone, DstFold, DstGap, DstNote, ExcludedBy, Exclusion, ExclusionError,
    Exclusions, NamedCalendar, Occurrence, Roll, RuleSource, Spec, Timetable, MAX_CALENDAR_DATES,
};

fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("instant")
}

/// Says whether an error is of the expected kind.
type Kind = fn(&ExclusionError) -> bool;

fn timetable(expr: &str, zone: &str, exclude: &[&str]) -> Timetable {
    let entries = exclude
        .iter()
        .map(|e| Exclusion::parse(e).expect("entry"))
        .collect();
    Timetable::new(
        Spec::parse(expr).expect("spec"),
        parse_zone(zone).expect("zone"),
        at("2026-01-01T00:00:00Z"),
    )
    .exclude(Exclusions::new(entries, Vec::new()))
}

#[test]
fn exclusion_entries_parse_or_are_refused_by_rule() {
    let ok = [
        "2026-12-25",
        "2026-12-24..2026-12-26",
        " 2026-01-01 ",
        "* * * * SAT,SUN",
        "0 12 * * *",
        "@daily",
    ];
    for entry in ok {
        assert!(Exclusion::parse(entry).is_ok(), "{entry:?} should parse");
    }
    let refused: [(&str, Kind); 7] = [
        ("2026-02-30", |e| matches!(e, ExclusionError::Date { .. })),
        ("2026-13-01", |e| matches!(e, ExclusionError::Date { .. })),
        ("2300-01-01", |e| matches!(e, ExclusionError::Date { .. })),
        ("2026-12-26..2026-12-24", |e| {
            matches!(e, ExclusionError::Backwards { .. })
        }),
        ("@every 1h", |e| matches!(e, ExclusionError::Cron { .. })),
        ("61 * * * *", |e| matches!(e, ExclusionError::Cron { .. })),
        ("christmas", |e| {
            matches!(e, ExclusionError::Unrecognised { .. })
        }),
    ];
    for (entry, expected) in refused {
        let err = Exclusion::parse(entry).expect_err(entry);
        assert!(expected(&err), "{entry:?}: {err:?}");
    }
}

#[test]
fn calendars_hold_at_most_ten_thousand_dates() {
    let first = NaiveDate::from_ymd_opt(1990, 1, 1).expect("date");
    let dates = |n: usize| first.iter_days().take(n).collect::<Vec<_>>();
    assert!(NamedCalendar::new("ok", dates(MAX_CALENDAR_DATES)).is_ok());
    assert!(matches!(
        NamedCalendar::new("big", dates(MAX_CALENDAR_DATES + 1)),
        Err(ExclusionError::TooManyDates { count }) if count == MAX_CALENDAR_DATES + 1
    ));
    assert!(parse_date("2026-1-1").is_err(), "dates are YYYY-MM-DD");
}

#[test]
fn excluded_times_name_what_removed_them() {
    let holidays = Arc::new(
        NamedCalendar::new("holidays", [parse_date("2026-01-02").expect("date")]).expect("cal"),
    );
    let entries = vec![Exclusion::parse("2026-01-01").expect("entry")];
    let timetable = Timetable::new(
        Spec::parse("0 9 * * *").expect("spec"),
        parse_zone("UTC").expect("zone"),
        at("2025-12-31T00:00:00Z"),
    )
    .exclude(Exclusions::new(entries, vec![holidays]));
    let removed =
        timetable.excluded_between(at("2025-12-31T00:00:00Z"), at("2026-01-05T00:00:00Z"), 10);
    let removed: Vec<(String, ExcludedBy)> = removed
        .into_iter()
        .map(|e| (e.at.to_rfc3339(), e.by))
        .collect();
    assert_eq!(
        removed,
        vec![
            (
                "2026-01-01T09:00:00+00:00".to_string(),
                ExcludedBy::Entry("2026-01-01".into())
            ),
            (
                "2026-01-02T09:00:00+00:00".to_string(),
                ExcludedBy::Calendar("holidays".into())
            ),
        ]
    );
    // Rolled ticks are moved, not removed.
    let rolled = timetable.clone().roll(Roll::Forward);
    assert!(rolled
        .excluded_between(at("2025-12-31T00:00:00Z"), at("2026-01-05T00:00:00Z"), 10)
        .is_empty());
}

#[test]
fn notes_say_where_a_tick_was_rolled_from_and_which_dst_rule_placed_it() {
    let weekend = timetable("0 9 1 * *", "UTC", &["* * * * SAT,SUN"]).roll(Roll::Forward);
    // 1 August 2026 is a Saturday: the tick fires on Monday 3 August.
    let tick = weekend
        .next_after(at("2026-07-15T00:00:00Z"))
        .expect("tick");
    assert_eq!(tick, at("2026-08-03T09:00:00Z"));
    let note = weekend.explain(tick);
    assert_eq!(note.rolled_from, Some(at("2026-08-01T09:00:00Z")));
    assert!(weekend.explain(at("2026-09-01T09:00:00Z")).is_plain());

    let gap = timetable("30 2 * * *", "America/New_York", &[]);
    let shifted = gap.explain(at("2025-03-09T07:00:00Z"));
    assert!(matches!(
        shifted.dst,
        Some(DstNote::Shifted {
            source: RuleSource::FixedTimeDefault,
            ..
        })
    ));

    let fold = timetable("30 1 * * *", "America/New_York", &[]).dst(None, Some(DstFold::Last));
    let second = fold.next_after(at("2025-11-01T12:00:00Z")).expect("tick");
    assert_eq!(second, at("2025-11-02T06:30:00Z"));
    assert_eq!(
        fold.explain(second).dst,
        Some(DstNote::Fold {
            occurrence: Occurrence::Second,
            fold: DstFold::Last,
            source: RuleSource::Schedule
        })
    );
    let skip = timetable("30 2 * * *", "America/New_York", &[]).dst(Some(DstGap::Skip), None);
    assert_eq!(
        skip.next_after(at("2025-03-08T12:00:00Z")),
        Some(at("2025-03-10T06:30:00Z"))
    );
}

#[test]
fn an_exclusion_of_every_tick_ends_the_search_promptly() {
    let started = std::time::Instant::now();
    let everything = timetable("*/5 * * * *", "Europe/London", &["* * * * *"]);
    assert_eq!(everything.next_after(at("2026-01-01T00:00:00Z")), None);
    let times = timetable("0 12 * * *", "UTC", &["0 12 * * *"]);
    assert_eq!(times.next_after(at("2026-01-01T00:00:00Z")), None);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn names_in_cron_exclusions_are_read_as_names() {
    // An exclusion goes through the schedule's own cron reading, so `WED`, `JUL` (with its
    // `L`) and `WED#2` mean what they do in a spec; each case lists the ticks left.
    let ticks = |expr: &str, exclude: &str, after: &str, n: usize| -> Vec<String> {
        timetable(expr, "UTC", &[exclude])
            .ticks_after(at(after))
            .take(n)
            .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
            .collect()
    };
    let noon =
        |dates: &[&str]| -> Vec<String> { dates.iter().map(|d| format!("{d} 12:00")).collect() };
    // 2026-01-01 is a Thursday; the 7th is its first Wednesday, the 14th its second.
    let table: [(&str, &str, &str, Vec<String>); 6] = [
        (
            "0 12 * * *",
            "* * * * WED",
            "2026-01-01T00:00:00Z",
            noon(&[
                "2026-01-01",
                "2026-01-02",
                "2026-01-03",
                "2026-01-04",
                "2026-01-05",
                "2026-01-06",
                "2026-01-08",
            ]),
        ),
        (
            "0 12 * * *",
            "* * * * mon-Wed",
            "2026-01-01T00:00:00Z",
            noon(&[
                "2026-01-01",
                "2026-01-02",
                "2026-01-03",
                "2026-01-04",
                "2026-01-08",
            ]),
        ),
        (
            "0 12 * * *",
            "* * * * WED#2",
            "2026-01-12T00:00:00Z",
            noon(&[
                "2026-01-12",
                "2026-01-13",
                "2026-01-15",
                "2026-01-16",
                "2026-01-17",
            ]),
        ),
        (
            "0 12 30 * *",
            "* * * JUL *",
            "2026-05-01T00:00:00Z",
            noon(&["2026-05-30", "2026-06-30", "2026-08-30", "2026-09-30"]),
        ),
        (
            "0 12 30 * *",
            "* * * jul-AUG ?",
            "2026-05-01T00:00:00Z",
            noon(&["2026-05-30", "2026-06-30", "2026-09-30", "2026-10-30"]),
        ),
        (
            // A time-of-day entry: only midnight of the second Wednesday of July goes.
            "0 0 * * WED",
            "0 0 * JUL WED#2",
            "2026-06-30T00:00:00Z",
            vec![
                "2026-07-01 00:00".to_string(),
                "2026-07-15 00:00".to_string(),
                "2026-07-22 00:00".to_string(),
            ],
        ),
    ];
    for (expr, exclude, after, expected) in table {
        assert_eq!(
            ticks(expr, exclude, after, expected.len()),
            expected,
            "{expr} excluding {exclude}"
        );
    }
    for entry in ["* * * * WED", "* * * JUL *", "* * ? * WED#2"] {
        let parsed = Exclusion::parse(entry).expect("entry");
        assert!(parsed.whole_days(), "{entry} excludes whole dates");
    }
    assert!(!Exclusion::parse("0 0 * JUL WED#2")
        .expect("entry")
        .whole_days());
    // The same refusals as in a spec, with the same rule.
    for (entry, rule) in [
        ("* * * * WEDL", "3L = last Wednesday"),
        ("* * * * 5W", "'W' belongs in day-of-month"),
    ] {
        let err = Exclusion::parse(entry).expect_err(entry);
        assert!(
            matches!(err, ExclusionError::Cron { .. }) && err.to_string().contains(rule),
            "{entry}: {err}"
        );
    }
}
