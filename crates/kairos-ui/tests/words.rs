//! The spec in words (`kairos_ui::describe`): one sentence per form the spec parser accepts,
//! checked against a table of expected sentences.

use kairos_ui::describe;

/// (spec, sentence) in UTC; cron sentences end with ", wall time in UTC".
const TABLE: &[(&str, &str)] = &[
    // Time of day.
    ("0 7 * * *", "at 07:00, every day"),
    ("30 9 * * 1-5", "at 09:30, on Monday to Friday"),
    ("0 9,17 * * *", "at 09:00 and 17:00, every day"),
    ("0 0,30 9 * * *", "at 09:00 and 09:30, every day"),
    ("15 30 9 * * *", "at 09:30:15, every day"),
    ("0 30 9 * * *", "at 09:30, every day"),
    ("* * * * *", "every minute"),
    ("*/15 * * * *", "every 15 minutes"),
    ("30 * * * *", "at minute 30 of every hour"),
    ("0,30 * * * *", "at minutes 0 and 30 of every hour"),
    (
        "0-30 * * * *",
        "every minute from minute 0 to 30 of every hour",
    ),
    (
        "0-30/10 * * * *",
        "every 10 minutes from minute 0 to 30 of every hour",
    ),
    (
        "*/5 9-17 * * *",
        "every 5 minutes between 09:00 and 17:59, every day",
    ),
    (
        "* 9 * * *",
        "every minute between 09:00 and 09:59, every day",
    ),
    ("0 9-17 * * *", "every hour from 09:00 to 17:00, every day"),
    (
        "30 */2 * * *",
        "every 2 hours from 00:30 to 22:30, every day",
    ),
    (
        "0 8-18/3 * * MON-FRI",
        "every 3 hours from 08:00 to 17:00, on Monday to Friday",
    ),
    (
        "*/10 */2 * * *",
        "every 10 minutes in every 2nd hour, every day",
    ),
    (
        "0 1-3,22 * * *",
        "at minute 0 in hours 01:00 to 03:00 and 22:00, every day",
    ),
    // Seconds field.
    ("*/5 * * * * *", "every 5 seconds"),
    ("* * * * * *", "every second"),
    ("30 * * * * *", "at second 30 of every minute"),
    ("0 */5 * * * *", "every 5 minutes"),
    (
        "10 */5 * * * *",
        "at second 10 of every 5th minute of every hour",
    ),
    (
        "*/5 * 9 * * *",
        "every 5 seconds between 09:00 and 09:59, every day",
    ),
    ("15 30 * * * *", "at second 15 of minute 30 of every hour"),
    (
        "0-10 * * * * *",
        "every second from second 0 to 10 of every minute",
    ),
    // Day of month: values, ranges, steps, L, LW, nW.
    ("0 0 1 * *", "at 00:00, on the 1st of the month"),
    (
        "0 0 1,15 * *",
        "at 00:00, on the 1st and the 15th of the month",
    ),
    (
        "0 0 1-7 * *",
        "at 00:00, on the 1st to the 7th of the month",
    ),
    (
        "0 0 1-31/2 * *",
        "at 00:00, on every 2nd day from the 1st to the 31st of the month",
    ),
    ("0 0 */2 * *", "at 00:00, on every 2nd day of the month"),
    ("0 0 L * *", "at 00:00, on the last day of the month"),
    ("0 0 LW * *", "at 00:00, on the last weekday of the month"),
    (
        "0 9 15W * *",
        "at 09:00, on the weekday nearest the 15th of the month",
    ),
    (
        "0 9 1,L * *",
        "at 09:00, on the 1st and the last day of the month",
    ),
    ("0 0 22 * *", "at 00:00, on the 22nd of the month"),
    ("0 0 13 * *", "at 00:00, on the 13th of the month"),
    // Day of week: names, numbers, 7 = Sunday, lists, steps, dL, #n, #L.
    ("0 10 * * MON", "at 10:00, on Monday"),
    ("0 10 * * 7", "at 10:00, on Sunday"),
    ("0 10 * * SAT,SUN", "at 10:00, on Saturday and Sunday"),
    ("0 10 * * FRI-SUN", "at 10:00, on Friday to Sunday"),
    ("0 10 * * 0-2", "at 10:00, on Sunday to Tuesday"),
    (
        "0 10 * * MON,WED,FRI",
        "at 10:00, on Monday, Wednesday and Friday",
    ),
    (
        "0 10 * * */2",
        "at 10:00, on Tuesday, Thursday, Saturday and Sunday",
    ),
    ("0 10 * * 0-6", "at 10:00, on every day of the week"),
    (
        "0 10 * * 1#2",
        "at 10:00, on the second Monday of the month",
    ),
    (
        "0 10 * * MON#1,FRI#3",
        "at 10:00, on the first Monday and the third Friday of the month",
    ),
    ("0 18 * * 5L", "at 18:00, on the last Friday of the month"),
    ("0 18 * * 5#L", "at 18:00, on the last Friday of the month"),
    (
        "0 18 * * MON,5L",
        "at 18:00, on Monday and on the last Friday of the month",
    ),
    // Both day fields: either (cron's OR), or both with `+`; `?`.
    (
        "0 0 1 * MON",
        "at 00:00, on the 1st of the month or on Monday",
    ),
    (
        "0 0 1-7 * +MON",
        "at 00:00, on the 1st to the 7th of the month if it is also a Monday",
    ),
    ("0 0 ? * MON", "at 00:00, on Monday"),
    ("0 0 1 * ?", "at 00:00, on the 1st of the month"),
    // Months: names, ranges, steps, lists.
    ("0 0 1 1 *", "at 00:00, on the 1st of January"),
    ("0 0 1 JAN-JUN *", "at 00:00, on the 1st of January to June"),
    (
        "0 0 1 */3 *",
        "at 00:00, on the 1st of January, April, July and October",
    ),
    ("0 0 L FEB *", "at 00:00, on the last day of February"),
    ("0 12 * DEC *", "at 12:00, every day in December"),
    ("0 12 * JUN,JUL * ", "at 12:00, every day in June and July"),
    ("0 12 * 1 MON", "at 12:00, on Monday in January"),
    ("0 10 * 3 1#2", "at 10:00, on the second Monday of March"),
    // Year field.
    (
        "0 0 0 1 1 * 2027",
        "at 00:00, on the 1st of January, in 2027",
    ),
    (
        "0 0 0 1 1 * 2027-2030",
        "at 00:00, on the 1st of January, in 2027 to 2030",
    ),
    ("0 0 0 * * * *", "at 00:00, every day"),
    // Nicknames.
    ("@yearly", "at 00:00, on the 1st of January"),
    ("@annually", "at 00:00, on the 1st of January"),
    ("@monthly", "at 00:00, on the 1st of the month"),
    ("@weekly", "at 00:00, on Sunday"),
    ("@daily", "at 00:00, every day"),
    ("@midnight", "at 00:00, every day"),
    ("@hourly", "at minute 0 of every hour"),
    ("@DAILY", "at 00:00, every day"),
];

#[test]
fn every_cron_form_reads_as_a_sentence() {
    let mut wrong = Vec::new();
    for (spec, expected) in TABLE {
        let expected = format!("{expected}, wall time in UTC");
        let got = describe(spec, "UTC");
        if got != expected {
            wrong.push(format!(
                "{spec:?}\n  expected: {expected}\n  got:      {got}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_zone_ends_every_cron_sentence() {
    assert_eq!(
        describe("0 7 * * *", "America/New_York"),
        "at 07:00, every day, wall time in America/New_York"
    );
}

#[test]
fn every_at_and_after_read_as_sentences() {
    let cases = [
        (
            "@every 5s",
            "every 5 seconds (counted from the start, not the wall clock)",
        ),
        (
            "@every 90s",
            "every 90 seconds (counted from the start, not the wall clock)",
        ),
        (
            "@every 1m",
            "every minute (counted from the start, not the wall clock)",
        ),
        (
            "@every 1d",
            "every day (counted from the start, not the wall clock)",
        ),
        (
            "@every 1h30m",
            "every 1 hour and 30 minutes (counted from the start, not the wall clock)",
        ),
        ("@at 2026-03-09T07:00:00Z", "once, at 2026-03-09T07:00:00Z"),
        (
            "@after nightly",
            "after each run of schedule nightly that succeeds",
        ),
        (
            "@after nightly on failure",
            "after each run of schedule nightly that fails for good (no attempt left)",
        ),
        (
            "@after nightly on always",
            "after each run of schedule nightly that ends (succeeds, fails for good or is \
             cancelled)",
        ),
    ];
    for (spec, expected) in cases {
        assert_eq!(describe(spec, "UTC"), expected, "{spec}");
    }
}

#[test]
fn a_spec_the_parser_refuses_is_shown_as_written() {
    assert_eq!(describe("61 * * * *", "UTC"), "61 * * * * (in UTC)");
    assert_eq!(describe("@reboot", "UTC"), "@reboot (in UTC)");
}
