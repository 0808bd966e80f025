//! docs/design.md §4.1 as a table: what parses (and how it is classified) and what is rejected,
//! with the field each rejection names.

use chrono::{DateTime, SecondsFormat, Utc};
use kairos_core::{parse_zone, CronField, JobKind, Spec, SpecError, Timetable};

fn kind(expr: &str) -> Option<JobKind> {
    Spec::parse(expr)
        .unwrap_or_else(|e| panic!("{expr:?} should parse: {e}"))
        .job_kind()
}

fn next3(expr: &str, tz: &str, after: &str) -> Vec<String> {
    let after: DateTime<Utc> = after.parse().expect("rfc3339");
    let spec = Spec::parse(expr).unwrap_or_else(|e| panic!("{expr:?} should parse: {e}"));
    Timetable::new(spec, parse_zone(tz).expect("zone"), after)
        .ticks_after(after)
        .take(3)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
        .collect()
}

fn field_error(expr: &str) -> CronField {
    match Spec::parse(expr) {
        Err(SpecError::Field { field, .. }) => field,
        other => panic!("{expr:?}: expected a field error, got {other:?}"),
    }
}

#[test]
fn accepted_syntax_and_classification() {
    use JobKind::{FixedTime, Wildcard};
    let table = [
        ("30 1,13 * * *", FixedTime),
        ("0 9-17 * * *", FixedTime),
        ("0 */2 * * *", Wildcard),
        ("*/15 2 * * *", Wildcard),
        ("@hourly", Wildcard),
        ("@daily", FixedTime),
        ("@midnight", FixedTime),
        ("@weekly", FixedTime),
        ("@monthly", FixedTime),
        ("@yearly", FixedTime),
        ("@annually", FixedTime),
        ("*/10 0 3 * * *", Wildcard),
        ("0 0 3 * * *", FixedTime),
        ("0 0 0 1 1 * 2030-2040", FixedTime),
        ("0 12 ? * MON-FRI", FixedTime),
        ("0 12 * jan,Jul ?", FixedTime),
        ("0 0 LW * *", FixedTime),
        ("0 0 * * 5#L", FixedTime),
        ("0 0 * * 1#2", FixedTime),
        ("0 0 * * FRI-SUN", FixedTime),
        ("0 0 1-31/2 * MON", FixedTime),
        ("0 0 */2 * +MON", FixedTime),
        ("0 0 */2 * *", FixedTime),
        ("0 0 * * 7", FixedTime),
    ];
    for (expr, expected) in table {
        assert_eq!(kind(expr), Some(expected), "{expr}");
    }
    assert_eq!(kind("@every 1h30m"), None);
    assert_eq!(kind("@at 2030-01-01T00:00:00Z"), None);
}

#[test]
fn sunday_is_zero_and_seven_and_names_are_case_insensitive() {
    let after = "2025-01-01T00:00:00Z";
    let sunday = next3("0 0 * * 0", "UTC", after);
    assert_eq!(sunday, next3("0 0 * * 7", "UTC", after));
    assert_eq!(sunday, next3("0 0 * * sun", "UTC", after));
    assert_eq!(sunday[0], "2025-01-05T00:00:00Z");
    assert_eq!(
        next3("0 0 * * FRI-SUN", "UTC", after),
        [
            "2025-01-03T00:00:00Z",
            "2025-01-04T00:00:00Z",
            "2025-01-05T00:00:00Z"
        ]
    );
}

#[test]
fn nth_and_last_weekdays() {
    let after = "2025-01-01T00:00:00Z";
    // Second Monday: Jan 13, Feb 10, Mar 10 (2025).
    assert_eq!(
        next3("0 0 * * 1#2", "UTC", after),
        [
            "2025-01-13T00:00:00Z",
            "2025-02-10T00:00:00Z",
            "2025-03-10T00:00:00Z"
        ]
    );
    // Last Friday, written #L and L: Jan 31, Feb 28, Mar 28.
    assert_eq!(
        next3("0 0 * * 5#L", "UTC", after),
        next3("0 0 * * 5L", "UTC", after)
    );
    // Last weekday of the month: Jan 31 (Fri), Feb 28 (Fri), Mar 31 (Mon).
    assert_eq!(
        next3("0 0 LW * *", "UTC", after),
        [
            "2025-01-31T00:00:00Z",
            "2025-02-28T00:00:00Z",
            "2025-03-31T00:00:00Z"
        ]
    );
}

/// Midnight (UTC) of each date, as `next3` prints it.
fn midnights(dates: [&str; 3]) -> Vec<String> {
    dates.iter().map(|d| format!("{d}T00:00:00Z")).collect()
}

#[test]
fn weekday_names_work_in_every_position() {
    // 2025-01-01 is a Wednesday; ticks are strictly after its midnight.
    let after = "2025-01-01T00:00:00Z";
    let wednesdays = ["2025-01-08", "2025-01-15", "2025-01-22"];
    let table: [(&str, [&str; 3]); 32] = [
        // Alone, in any case, with `?` or `+` beside it, in 5, 6 and 7 fields.
        ("0 0 * * WED", wednesdays),
        ("0 0 * * wed", wednesdays),
        ("0 0 * * Wed", wednesdays),
        ("0 0 * * 3", wednesdays),
        ("0 0 ? * WED", wednesdays),
        ("0 0 * * +WED", wednesdays),
        ("0 0 0 * * WED", wednesdays),
        ("0 0 0 ? * wed", wednesdays),
        ("0 0 0 * * WED 2025", wednesdays),
        (
            "0 0 0 ? * WED 2026",
            ["2026-01-07", "2026-01-14", "2026-01-21"],
        ),
        // Lists and ranges, the name first, last or in the middle.
        (
            "0 0 * * MON,WED",
            ["2025-01-06", "2025-01-08", "2025-01-13"],
        ),
        (
            "0 0 * * TUE,WED",
            ["2025-01-07", "2025-01-08", "2025-01-14"],
        ),
        ("0 0 * * WED,1", ["2025-01-06", "2025-01-08", "2025-01-13"]),
        (
            "0 0 * * MON-WED",
            ["2025-01-06", "2025-01-07", "2025-01-08"],
        ),
        (
            "0 0 * * WED-FRI",
            ["2025-01-02", "2025-01-03", "2025-01-08"],
        ),
        ("0 0 * * wed-5", ["2025-01-02", "2025-01-03", "2025-01-08"]),
        (
            "0 0 0 ? * mon-Wed",
            ["2025-01-06", "2025-01-07", "2025-01-08"],
        ),
        (
            "0 0 0 * * TUE,WED 2025",
            ["2025-01-07", "2025-01-08", "2025-01-14"],
        ),
        // Steps over a named range.
        (
            "0 0 * * MON-FRI/2",
            ["2025-01-03", "2025-01-06", "2025-01-08"],
        ),
        (
            "0 0 * * WED-SAT/2",
            ["2025-01-03", "2025-01-08", "2025-01-10"],
        ),
        // The n-th and the last weekday of the month, named or numbered.
        ("0 0 * * WED#2", ["2025-01-08", "2025-02-12", "2025-03-12"]),
        ("0 0 ? * wed#2", ["2025-01-08", "2025-02-12", "2025-03-12"]),
        (
            "0 0 0 * * WED#2 2025",
            ["2025-01-08", "2025-02-12", "2025-03-12"],
        ),
        ("0 0 * * WED#L", ["2025-01-29", "2025-02-26", "2025-03-26"]),
        ("0 0 * * 3L", ["2025-01-29", "2025-02-26", "2025-03-26"]),
        ("0 0 0 ? * 3L", ["2025-01-29", "2025-02-26", "2025-03-26"]),
        // Both day fields: either matches (Vixie), or both with `+`.
        ("0 0 10 * WED", ["2025-01-08", "2025-01-10", "2025-01-15"]),
        ("0 0 13 * +WED", ["2025-08-13", "2026-05-13", "2027-01-13"]),
        // Sunday ends a range as 7, but a range from Sunday to Sunday is Sunday.
        (
            "0 0 * * SAT-SUN",
            ["2025-01-04", "2025-01-05", "2025-01-11"],
        ),
        (
            "0 0 * * SUN-SUN",
            ["2025-01-05", "2025-01-12", "2025-01-19"],
        ),
        (
            "0 0 * * MON-MON",
            ["2025-01-06", "2025-01-13", "2025-01-20"],
        ),
        (
            "0 0 * * SUN-SAT/3",
            ["2025-01-04", "2025-01-05", "2025-01-08"],
        ),
    ];
    for (expr, dates) in table {
        assert_eq!(next3(expr, "UTC", after), midnights(dates), "{expr}");
    }
    // Seconds next to a name: the first tick is on the starting Wednesday itself.
    assert_eq!(
        next3("30 0 0 ? * MON-WED", "UTC", after),
        [
            "2025-01-01T00:00:30Z",
            "2025-01-06T00:00:30Z",
            "2025-01-07T00:00:30Z"
        ]
    );
}

#[test]
fn month_names_are_resolved_before_any_letter_is_looked_for() {
    // `JUL` holds an `L`, `JUN` and `JAN` an `N`: none of them is a modifier.
    let after = "2025-01-01T00:00:00Z";
    let table: [(&str, [&str; 3]); 9] = [
        ("0 0 1 JUL *", ["2025-07-01", "2026-07-01", "2027-07-01"]),
        ("0 0 1 jul *", ["2025-07-01", "2026-07-01", "2027-07-01"]),
        (
            "0 0 1 JUL-DEC *",
            ["2025-07-01", "2025-08-01", "2025-09-01"],
        ),
        (
            "0 0 1 JAN-DEC/6 *",
            ["2025-07-01", "2026-01-01", "2026-07-01"],
        ),
        ("0 0 L JUL *", ["2025-07-31", "2026-07-31", "2027-07-31"]),
        ("0 0 * JUL WED", ["2025-07-02", "2025-07-09", "2025-07-16"]),
        (
            "0 0 * JUL WED#2",
            ["2025-07-09", "2026-07-08", "2027-07-14"],
        ),
        (
            "0 0 ? Jul WED#L",
            ["2025-07-30", "2026-07-29", "2027-07-28"],
        ),
        (
            "0 0 15 JUL,aug FRI",
            ["2025-07-04", "2025-07-11", "2025-07-15"],
        ),
    ];
    for (expr, dates) in table {
        assert_eq!(next3(expr, "UTC", after), midnights(dates), "{expr}");
    }
}

#[test]
fn w_and_l_beside_weekday_names_are_refused_with_the_rule() {
    let message = |expr: &str| match Spec::parse(expr) {
        Err(err @ SpecError::Field { .. }) => {
            assert_eq!(field_error(expr), CronField::DayOfWeek, "{expr}");
            err.to_string()
        }
        other => panic!("{expr:?}: expected a day-of-week error, got {other:?}"),
    };
    let nearest = "'W' belongs in day-of-month (nearest weekday), not day-of-week";
    for expr in [
        "0 0 * * 5W",
        "0 0 * * LW",
        "0 0 * * W",
        "0 0 * * w",
        "0 0 * * W3",
        "0 0 * * MON-5W",
        "0 0 * * WED,LW",
        "0 0 0 * * 5W",
        "0 0 0 ? * LW 2026",
    ] {
        let text = message(expr);
        assert!(text.contains(nearest), "{expr}: {text}");
    }
    for (expr, hint) in [
        ("0 0 * * WEDL", "3L = last Wednesday"),
        ("0 0 * * wedl", "3L = last Wednesday"),
        ("0 0 * * FRIL", "5L = last Friday"),
        ("0 0 0 ? * SUNL", "0L = last Sunday"),
    ] {
        let text = message(expr);
        assert!(
            text.contains("write the weekday number before L") && text.contains(hint),
            "{expr}: {text}"
        );
    }
    for (expr, rule) in [
        ("0 0 * * WED-FRIL", "apply to a single weekday"),
        ("0 0 * * WED-FRI#2", "apply to a single weekday"),
        ("0 0 * * WEDS", "not a weekday name"),
        ("0 0 * * WED#6", "#1 to #5"),
        ("0 0 * * WED/2", "is not accepted"),
        ("0 0 * * WED-MON", "runs backwards"),
    ] {
        let text = message(expr);
        assert!(text.contains(rule), "{expr}: {text}");
    }
    let text = Spec::parse("0 0 * JULL *")
        .expect_err("not a month")
        .to_string();
    assert!(text.contains("not a month name"), "{text}");
}

#[test]
fn rejections_name_the_field() {
    let table = [
        ("0 0 * * L", CronField::DayOfWeek),
        ("5/15 * * * *", CronField::Minute),
        ("0 0 0 1 1 * 1969", CronField::Year),
        ("0 0 0 1 1 * 2200", CronField::Year),
        ("60 * * * *", CronField::Minute),
        ("0 24 * * *", CronField::Hour),
        ("0 0 32 * *", CronField::DayOfMonth),
        ("0 0 * 13 *", CronField::Month),
        ("0 0 * * 8", CronField::DayOfWeek),
        ("0 0 * FOO *", CronField::Month),
        ("0 0 * * FUNDAY", CronField::DayOfWeek),
        ("*/0 * * * *", CronField::Minute),
        ("*/61 * * * *", CronField::Minute),
        ("0 17-9 * * *", CronField::Hour),
        ("0 ? * * *", CronField::Hour),
        ("0 0 * * 5#6", CronField::DayOfWeek),
        ("0 0 * * 1-5#2", CronField::DayOfWeek),
        ("0 0 15W * 1W", CronField::DayOfWeek),
        ("0 0 L-3 * *", CronField::DayOfMonth),
        ("+0 0 * * *", CronField::Minute),
        ("0 0 *,1 * *", CronField::DayOfMonth),
        ("0 0 1,,2 * *", CronField::DayOfMonth),
        ("a b c d e", CronField::Minute),
    ];
    for (expr, field) in table {
        assert_eq!(field_error(expr), field, "{expr}");
    }
}

#[test]
fn other_rejections() {
    let check = |expr: &str, ok: fn(&SpecError) -> bool| {
        let err = Spec::parse(expr).expect_err(expr);
        assert!(ok(&err), "{expr}: unexpected {err:?}");
        assert!(!err.to_string().contains('\n'), "one-line message: {err}");
    };
    check("", |e| matches!(e, SpecError::Empty));
    check("   ", |e| matches!(e, SpecError::Empty));
    check("bogus", |e| matches!(e, SpecError::FieldCount { found: 1 }));
    check("* * * *", |e| {
        matches!(e, SpecError::FieldCount { found: 4 })
    });
    check("* * * * * * * *", |e| {
        matches!(e, SpecError::FieldCount { found: 8 })
    });
    check("@reboot", |e| matches!(e, SpecError::Nickname { .. }));
    check("@fortnightly", |e| matches!(e, SpecError::Nickname { .. }));
    check("0 0 */2 * MON", |e| {
        matches!(e, SpecError::DayFields { .. })
    });
    check("0 0 1 * */2", |e| matches!(e, SpecError::DayFields { .. }));
    check("0 0 30 2 *", |e| matches!(e, SpecError::NeverFires { .. }));
    check("0 0 31 4,6,9,11 *", |e| {
        matches!(e, SpecError::NeverFires { .. })
    });
    check("@every", |e| matches!(e, SpecError::Nickname { .. }));
    check("@every 0s", |e| matches!(e, SpecError::Every { .. }));
    check("@every 10", |e| matches!(e, SpecError::Every { .. }));
    check("@every 1w", |e| matches!(e, SpecError::Every { .. }));
    check("@every 3651d", |e| matches!(e, SpecError::Every { .. }));
    check("@at tomorrow", |e| matches!(e, SpecError::At { .. }));
    check("@at 2026-01-01T00:00:00", |e| {
        matches!(e, SpecError::At { .. })
    });
    check("@at 2026-01-01T00:00:00.5Z", |e| {
        matches!(e, SpecError::At { .. })
    });
    check("@at 2300-01-01T00:00:00Z", |e| {
        matches!(e, SpecError::At { .. })
    });
}

#[test]
fn every_is_anchored_and_at_fires_once() {
    let anchor: DateTime<Utc> = "2025-01-01T00:00:10Z".parse().expect("rfc3339");
    let every = Timetable::new(
        Spec::parse("@every 1h30m").expect("every"),
        chrono_tz::UTC,
        anchor,
    );
    let ticks: Vec<_> = every.ticks_after(anchor).take(2).collect();
    assert_eq!(ticks[0].to_rfc3339(), "2025-01-01T01:30:10+00:00");
    assert_eq!(ticks[1].to_rfc3339(), "2025-01-01T03:00:10+00:00");
    // start_at replaces the anchor and is itself a tick (the window is inclusive).
    let start: DateTime<Utc> = "2025-06-01T12:00:00Z".parse().expect("rfc3339");
    let windowed = every.clone().window(Some(start), None);
    assert_eq!(windowed.first_at_or_after(anchor), Some(start));

    let once = Timetable::new(
        Spec::parse("@at 2030-05-01T10:00:00+02:00").expect("at"),
        chrono_tz::UTC,
        anchor,
    );
    let all: Vec<_> = once.ticks_after(anchor).collect();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].to_rfc3339(), "2030-05-01T08:00:00+00:00");
}

#[test]
fn window_bounds_are_inclusive() {
    let start: DateTime<Utc> = "2025-01-01T10:00:00Z".parse().expect("rfc3339");
    let end: DateTime<Utc> = "2025-01-01T12:00:00Z".parse().expect("rfc3339");
    let timetable = Timetable::new(
        Spec::parse("@hourly").expect("hourly"),
        chrono_tz::UTC,
        start,
    )
    .window(Some(start), Some(end));
    let all: Vec<_> = timetable
        .ticks_after(start - chrono::Duration::days(1))
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
        .collect();
    assert_eq!(
        all,
        [
            "2025-01-01T10:00:00Z",
            "2025-01-01T11:00:00Z",
            "2025-01-01T12:00:00Z"
        ]
    );
}

#[test]
fn past_years_are_exhausted_not_an_error_loop() {
    let after: DateTime<Utc> = "2025-01-01T00:00:00Z".parse().expect("rfc3339");
    let spec = Spec::parse("0 0 0 1 1 * 2020-2022").expect("fired in the past, so it parses");
    assert_eq!(
        Timetable::new(spec, chrono_tz::UTC, after).next_after(after),
        None
    );
    let spec = Spec::parse("59 59 23 31 12 * 2199").expect("last second of the horizon");
    let last = Timetable::new(spec, chrono_tz::UTC, after).next_after(after);
    assert_eq!(
        last.map(|t| t.to_rfc3339()),
        Some("2199-12-31T23:59:59+00:00".to_string())
    );
}

#[test]
fn zone_errors_are_clear() {
    let err = parse_zone("Mars/Base").expect_err("not a zone");
    assert!(err.to_string().contains("Mars/Base"));
    let err = parse_zone("america/new_york").expect_err("case matters");
    assert!(err.to_string().contains("America/New_York"), "{err}");
}
