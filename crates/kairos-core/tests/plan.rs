//! The planner's policy as a table: schedule state and pass knobs in, runs and counts out.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use kairos_core::{
    plan, CatchupPolicy, Plan, PlanInput, PlanParams, RunKey, Spec, Timetable,
    MAX_MISSED_ENUMERATED,
};

fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("rfc3339")
}

fn fmt(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

struct Case {
    spec: &'static str,
    next_run_at: &'static str,
    now: &'static str,
    catchup: CatchupPolicy,
    jitter_ms: u32,
}

fn run(case: &Case, max_catchup: u32, per_pass: u32) -> Plan {
    let spec = Spec::parse(case.spec).expect("spec");
    let timetable = Timetable::new(spec, chrono_tz::UTC, at("2020-01-01T00:00:00Z"));
    let input = PlanInput {
        schedule_id: "s1",
        timetable: &timetable,
        next_run_at: at(case.next_run_at),
        jitter_ms: case.jitter_ms,
        catchup: case.catchup,
    };
    let params = PlanParams {
        now: at(case.now),
        lookahead: Duration::seconds(60),
        misfire_grace: Duration::seconds(60),
        max_catchup,
        max_catchup_per_pass: per_pass,
    };
    plan(input, params)
}

/// `(run_at, fire_at, catchup)` rows plus `missed` and `next_run_at`.
fn check(
    case: Case,
    max_catchup: u32,
    per_pass: u32,
    runs: &[(&str, &str, bool)],
    missed: u64,
    next: Option<&str>,
) {
    let plan = run(&case, max_catchup, per_pass);
    let got: Vec<(String, String, bool)> = plan
        .runs
        .iter()
        .map(|r| (fmt(r.run_at), fmt(r.fire_at), r.catchup))
        .collect();
    let want: Vec<(String, String, bool)> = runs
        .iter()
        .map(|(r, f, c)| (fmt(at(r)), fmt(at(f)), *c))
        .collect();
    assert_eq!(got, want, "runs of {}", case.spec);
    assert_eq!(plan.missed, missed, "missed of {}", case.spec);
    assert_eq!(
        plan.next_run_at.map(fmt),
        next.map(|n| fmt(at(n))),
        "next of {}",
        case.spec
    );
    for run in &plan.runs {
        assert_eq!(
            run.key,
            RunKey::tick("s1", run.run_at),
            "keys come from run_at"
        );
    }
}

#[test]
fn on_time_ticks_within_lookahead() {
    let case = Case {
        spec: "*/20 * * * * *",
        next_run_at: "2026-01-01T10:00:20Z",
        now: "2026-01-01T10:00:10Z",
        catchup: CatchupPolicy::None,
        jitter_ms: 0,
    };
    check(
        case,
        100,
        100,
        &[
            ("2026-01-01T10:00:20Z", "2026-01-01T10:00:20Z", false),
            ("2026-01-01T10:00:40Z", "2026-01-01T10:00:40Z", false),
            ("2026-01-01T10:01:00Z", "2026-01-01T10:01:00Z", false),
        ],
        0,
        Some("2026-01-01T10:01:20Z"),
    );
}

#[test]
fn late_within_grace_fires_normally() {
    let case = Case {
        spec: "* * * * *",
        next_run_at: "2026-01-01T10:00:00Z",
        now: "2026-01-01T10:00:45Z",
        catchup: CatchupPolicy::None,
        jitter_ms: 0,
    };
    check(
        case,
        100,
        100,
        &[
            ("2026-01-01T10:00:00Z", "2026-01-01T10:00:00Z", false),
            ("2026-01-01T10:01:00Z", "2026-01-01T10:01:00Z", false),
        ],
        0,
        Some("2026-01-01T10:02:00Z"),
    );
}

#[test]
fn none_counts_missed_ticks_and_fires_none_of_them() {
    let case = Case {
        spec: "* * * * *",
        next_run_at: "2026-01-01T09:00:00Z",
        now: "2026-01-01T10:00:30Z",
        catchup: CatchupPolicy::None,
        jitter_ms: 0,
    };
    // 09:00 .. 09:59 are older than now - 60 s (09:59:30): 60 missed; 10:00 and 10:01 fire.
    check(
        case,
        100,
        100,
        &[
            ("2026-01-01T10:00:00Z", "2026-01-01T10:00:00Z", false),
            ("2026-01-01T10:01:00Z", "2026-01-01T10:01:00Z", false),
        ],
        60,
        Some("2026-01-01T10:02:00Z"),
    );
}

#[test]
fn fire_immediately_keeps_the_newest_max_catchup_and_fires_them_now() {
    let case = Case {
        spec: "*/10 * * * *",
        next_run_at: "2026-01-01T09:00:00Z",
        now: "2026-01-01T10:00:30Z",
        catchup: CatchupPolicy::FireImmediately,
        jitter_ms: 0,
    };
    // Missed: 09:00..09:50 (6). Newest 2 are caught up at `now`; 4 counted.
    check(
        case,
        2,
        100,
        &[
            ("2026-01-01T09:40:00Z", "2026-01-01T10:00:30Z", true),
            ("2026-01-01T09:50:00Z", "2026-01-01T10:00:30Z", true),
            ("2026-01-01T10:00:00Z", "2026-01-01T10:00:00Z", false),
        ],
        4,
        Some("2026-01-01T10:10:00Z"),
    );
}

#[test]
fn fire_immediately_is_bounded_per_pass_and_resumes() {
    let case = Case {
        spec: "*/10 * * * *",
        next_run_at: "2026-01-01T09:00:00Z",
        now: "2026-01-01T10:00:30Z",
        catchup: CatchupPolicy::FireImmediately,
        jitter_ms: 0,
    };
    check(
        case,
        100,
        2,
        &[
            ("2026-01-01T09:00:00Z", "2026-01-01T10:00:30Z", true),
            ("2026-01-01T09:10:00Z", "2026-01-01T10:00:30Z", true),
        ],
        0,
        Some("2026-01-01T09:20:00Z"),
    );
}

#[test]
fn spread_distributes_missed_ticks_across_the_lookahead() {
    let case = Case {
        spec: "*/15 * * * *",
        next_run_at: "2026-01-01T09:00:00Z",
        now: "2026-01-01T10:00:30Z",
        catchup: CatchupPolicy::Spread,
        jitter_ms: 0,
    };
    check(
        case,
        100,
        100,
        &[
            ("2026-01-01T09:00:00Z", "2026-01-01T10:00:30Z", true),
            ("2026-01-01T09:15:00Z", "2026-01-01T10:00:45Z", true),
            ("2026-01-01T09:30:00Z", "2026-01-01T10:01:00Z", true),
            ("2026-01-01T09:45:00Z", "2026-01-01T10:01:15Z", true),
            ("2026-01-01T10:00:00Z", "2026-01-01T10:00:00Z", false),
        ],
        0,
        Some("2026-01-01T10:15:00Z"),
    );
}

#[test]
fn jitter_moves_fire_at_within_bounds_and_never_the_key() {
    let case = Case {
        spec: "*/5 * * * * *",
        next_run_at: "2026-01-01T10:00:05Z",
        now: "2026-01-01T10:00:00Z",
        catchup: CatchupPolicy::None,
        jitter_ms: 2_000,
    };
    let plan = run(&case, 100, 100);
    assert_eq!(plan.runs.len(), 12);
    assert!(
        plan.runs.iter().any(|r| r.fire_at != r.run_at),
        "some offset is non-zero"
    );
    for r in &plan.runs {
        let offset = r.fire_at - r.run_at;
        assert!(offset.num_milliseconds().abs() <= 2_000, "{offset}");
    }
    assert_eq!(plan, run(&case, 100, 100), "deterministic");
}

#[test]
fn exhausted_schedules_end_with_no_next_run() {
    let case = Case {
        spec: "@at 2026-01-01T10:00:30Z",
        next_run_at: "2026-01-01T10:00:30Z",
        now: "2026-01-01T10:00:00Z",
        catchup: CatchupPolicy::None,
        jitter_ms: 0,
    };
    check(
        case,
        100,
        100,
        &[("2026-01-01T10:00:30Z", "2026-01-01T10:00:30Z", false)],
        0,
        None,
    );
}

#[test]
fn a_huge_backlog_is_skipped_over_not_enumerated_forever() {
    let case = Case {
        spec: "* * * * * *",
        next_run_at: "2025-01-01T00:00:00Z",
        now: "2026-01-01T00:00:00Z",
        catchup: CatchupPolicy::FireImmediately,
        jitter_ms: 0,
    };
    let plan = run(&case, 100, 100);
    assert!(plan.missed_truncated);
    assert!(plan.missed >= MAX_MISSED_ENUMERATED - 1);
    assert!(plan.runs.iter().all(|r| !r.catchup));
    assert_eq!(
        plan.runs.first().map(|r| fmt(r.run_at)),
        Some(fmt(at("2025-12-31T23:59:00Z")))
    );
    assert_eq!(plan.runs.len(), 121);
}
