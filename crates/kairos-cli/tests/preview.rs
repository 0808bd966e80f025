//! `kairos preview` as a user runs it: output format, exit codes, one-line errors.

use std::process::{Command, Output};

fn preview(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kairos"))
        .arg("preview")
        .args(args)
        .output()
        .expect("run kairos")
}

fn stderr_line(output: &Output) -> String {
    let stderr = String::from_utf8(output.stderr.clone()).expect("utf-8");
    assert_eq!(stderr.lines().count(), 1, "one line on stderr: {stderr:?}");
    stderr
}

#[test]
fn json_prints_exactly_the_vector_instants() {
    let output = preview(&[
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2025-03-08T12:00:00Z",
        "-n",
        "3",
        "--json",
    ]);
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8(output.stdout).expect("utf-8"),
        "{\"fire_times\":[\"2025-03-09T07:00:00Z\",\"2025-03-10T06:30:00Z\",\"2025-03-11T06:30:00Z\"]}\n"
    );
}

#[test]
fn plain_output_is_one_time_per_line() {
    let output = preview(&[
        "*/15 * * * * *",
        "--after",
        "2025-01-01T00:00:50Z",
        "-n",
        "2",
    ]);
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8(output.stdout).expect("utf-8"),
        "2025-01-01T00:01:00Z\n2025-01-01T00:01:15Z\n"
    );
}

#[test]
fn invalid_expression_exits_2_naming_the_problem() {
    let output = preview(&["bogus", "--tz", "UTC"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr_line(&output).contains("field"));

    let output = preview(&["0 0 * * L", "--tz", "UTC"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr_line(&output).contains("day-of-week field \"L\""));
    assert!(output.stdout.is_empty());
}

#[test]
fn unknown_zone_exits_2_naming_the_zone() {
    let output = preview(&["* * * * *", "--tz", "Mars/Base"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr_line(&output).contains("Mars/Base"));
}

#[test]
fn bad_after_exits_2() {
    let output = preview(&["* * * * *", "--after", "yesterday"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr_line(&output).contains("--after"));
}

#[test]
fn exhausted_expression_prints_an_empty_list() {
    let output = preview(&[
        "0 0 0 1 1 * 2020-2022",
        "--after",
        "2025-01-01T00:00:00Z",
        "--json",
    ]);
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8(output.stdout).expect("utf-8"),
        "{\"fire_times\":[]}\n"
    );
}

/// "9:00 on the first business day of the month": weekends excluded, a holiday calendar
/// file, ticks rolled forward.
#[test]
fn calendar_flags_exclude_and_roll_offline() {
    let dir = tempfile::tempdir().expect("temp dir");
    let holidays = dir.path().join("holidays.json");
    std::fs::write(
        &holidays,
        r#"{"dates": ["2026-04-01"], "description": "test"}"#,
    )
    .expect("write calendar");
    let output = preview(&[
        "0 9 1 * *",
        "--tz",
        "UTC",
        "--after",
        "2026-02-15T00:00:00Z",
        "-n",
        "3",
        "--exclude",
        "* * * * SAT,SUN",
        "--calendar-file",
        holidays.to_str().expect("utf-8 path"),
        "--roll",
        "forward",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8(output.stdout).expect("utf-8"),
        // 1 March 2026 is a Sunday; 1 April a holiday; 1 May a Friday.
        "2026-03-02T09:00:00Z\n2026-04-02T09:00:00Z\n2026-05-01T09:00:00Z\n"
    );
}

#[test]
fn bad_calendar_flags_exit_2_naming_the_flag() {
    for (args, flag) in [
        (vec!["0 9 * * *", "--exclude", "2026-13-01"], "--exclude"),
        (vec!["@every 1h", "--roll", "forward"], "--roll"),
        (vec!["0 9 * * *", "--dst-gap", "sideways"], "--dst-gap"),
        (vec!["0 9 * * *", "--dst-fold", "middle"], "--dst-fold"),
        (
            vec!["0 9 * * *", "--calendar-file", "/nonexistent/cal.json"],
            "--calendar-file",
        ),
    ] {
        let output = preview(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let line = stderr_line(&output);
        assert!(line.contains(flag), "{args:?}: {line}");
    }
}

fn stdout_lines(output: &Output) -> Vec<String> {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone())
        .expect("utf-8")
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn explain_marks_a_dst_gap_shift_and_both_passes_of_a_repeated_hour() {
    let gap = stdout_lines(&preview(&[
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2026-03-07T12:00:00Z",
        "-n",
        "2",
        "--explain",
    ]));
    assert_eq!(
        gap,
        [
            "2026-03-08T07:00:00Z  wall 2026-03-08T03:00:00 -04:00  DST gap: 02:30:00 did not \
             exist, shifted to the jump (default for fixed-time jobs)",
            "2026-03-09T06:30:00Z  wall 2026-03-09T02:30:00 -04:00",
        ]
    );
    let fold = stdout_lines(&preview(&[
        "30 1 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2026-10-31T12:00:00Z",
        "-n",
        "2",
        "--dst-fold",
        "both",
        "--explain",
    ]));
    assert_eq!(
        fold,
        [
            "2026-11-01T05:30:00Z  wall 2026-11-01T01:30:00 -04:00  repeated hour: first pass \
             (schedule)",
            "2026-11-01T06:30:00Z  wall 2026-11-01T01:30:00 -05:00  repeated hour: second pass \
             (schedule)",
        ]
    );
}

#[test]
fn explain_shows_jitter_and_the_times_outside_the_window() {
    let lines = stdout_lines(&preview(&[
        "0 * * * *",
        "--after",
        "2026-03-08T12:00:00Z",
        "--end-at",
        "2026-03-08T13:00:00Z",
        "--schedule-id",
        "s",
        "--jitter-ms",
        "600000",
        "--explain",
    ]));
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with("2026-03-08T13:00:00Z  wall 2026-03-08T13:00:00 +00:00  jittered "),
        "{lines:?}"
    );
    assert_eq!(
        lines[1],
        "2026-03-08T14:00:00Z  outside the window (after end_at)"
    );
}

#[test]
fn explain_shows_each_runs_deadline() {
    let lines = stdout_lines(&preview(&[
        "0 7 * * *",
        "--after",
        "2026-03-08T12:00:00Z",
        "-n",
        "2",
        "--deadline-s",
        "5400",
        "--explain",
    ]));
    assert_eq!(
        lines,
        [
            "2026-03-09T07:00:00Z  wall 2026-03-09T07:00:00 +00:00  must be final by \
             2026-03-09T08:30:00Z",
            "2026-03-10T07:00:00Z  wall 2026-03-10T07:00:00 +00:00  must be final by \
             2026-03-10T08:30:00Z",
        ]
    );
    let refused = preview(&["0 7 * * *", "--deadline-s", "0", "--explain"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(stderr_line(&refused).contains("--deadline-s 0 is out of range"));
}

#[test]
fn a_count_outside_one_to_a_thousand_is_refused_naming_the_range() {
    for count in ["0", "1001"] {
        let output = preview(&["* * * * *", "-n", count]);
        assert!(!output.status.success(), "-n {count}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("--count") && stderr.contains("1..=1000"),
            "-n {count}: {stderr}"
        );
    }
    let output = preview(&["* * * * *", "-n", "1000", "--after", "2026-01-01T00:00:00Z"]);
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).lines().count(),
        1000
    );
}
