//! The dropped missed ticks `plan_keeping_dropped` returns (for schedules with a deadline):
//! the newest ones, at most `MAX_DROPPED_KEPT`, each with why it was not fired; `plan`
//! returns none and decides exactly the same runs.

use chrono::{DateTime, Duration, Utc};
use kairos_core::{
    plan, plan_keeping_dropped, CatchupPolicy, DropReason, PlanInput, PlanParams, RunKey, Spec,
    Timetable, MAX_DROPPED_KEPT,
};

fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("rfc3339")
}

fn params(now: &str, max_catchup: u32) -> PlanParams {
    PlanParams {
        now: at(now),
        lookahead: Duration::seconds(60),
        misfire_grace: Duration::seconds(60),
        max_catchup,
        max_catchup_per_pass: 100,
    }
}

fn timetable(spec: &str) -> Timetable {
    Timetable::new(
        Spec::parse(spec).expect("spec"),
        chrono_tz::UTC,
        at("2020-01-01T00:00:00Z"),
    )
}

fn input<'a>(timetable: &'a Timetable, next: &str, catchup: CatchupPolicy) -> PlanInput<'a> {
    PlanInput {
        schedule_id: "s1",
        timetable,
        next_run_at: at(next),
        jitter_ms: 0,
        catchup,
    }
}

#[test]
fn catch_up_none_drops_every_missed_tick_with_its_reason_and_key() {
    let hourly = timetable("0 * * * *");
    let input = input(&hourly, "2026-03-01T01:00:00Z", CatchupPolicy::None);
    let params = params("2026-03-01T04:00:30Z", 100);
    let kept = plan_keeping_dropped(input, params, MAX_DROPPED_KEPT);
    let ticks: Vec<_> = kept.dropped.iter().map(|t| t.run_at).collect();
    assert_eq!(
        ticks,
        [
            at("2026-03-01T01:00:00Z"),
            at("2026-03-01T02:00:00Z"),
            at("2026-03-01T03:00:00Z")
        ]
    );
    assert!(kept
        .dropped
        .iter()
        .all(|t| t.reason == DropReason::CatchupNone && t.key == RunKey::tick("s1", t.run_at)));
    assert_eq!(kept.missed, 3, "still counted");
    let plain = plan(input, params);
    assert!(plain.dropped.is_empty());
    assert_eq!((plain.runs, plain.missed), (kept.runs, kept.missed));
    assert_eq!(DropReason::CatchupNone.as_str(), "missed: catch-up none");
}

#[test]
fn ticks_older_than_max_catchup_are_dropped_and_the_newest_caught_up() {
    let hourly = timetable("0 * * * *");
    let input = input(
        &hourly,
        "2026-03-01T01:00:00Z",
        CatchupPolicy::FireImmediately,
    );
    let kept = plan_keeping_dropped(input, params("2026-03-01T04:00:30Z", 1), 10);
    let dropped: Vec<_> = kept.dropped.iter().map(|t| (t.run_at, t.reason)).collect();
    assert_eq!(
        dropped,
        [
            (at("2026-03-01T01:00:00Z"), DropReason::OlderThanMaxCatchup),
            (at("2026-03-01T02:00:00Z"), DropReason::OlderThanMaxCatchup)
        ]
    );
    let runs: Vec<_> = kept.runs.iter().map(|r| (r.run_at, r.catchup)).collect();
    assert_eq!(
        runs,
        [
            (at("2026-03-01T03:00:00Z"), true),
            (at("2026-03-01T04:00:00Z"), false)
        ]
    );
}

#[test]
fn only_the_newest_are_kept_and_the_rest_counted() {
    let minutely = timetable("* * * * *");
    let input = input(&minutely, "2026-03-01T00:00:00Z", CatchupPolicy::None);
    // 2,000 missed minutes.
    let kept = plan_keeping_dropped(input, params("2026-03-02T09:21:00Z", 100), usize::MAX);
    assert_eq!(kept.missed, 2_000);
    assert_eq!(
        kept.dropped.len(),
        MAX_DROPPED_KEPT,
        "bounded by the constant"
    );
    assert_eq!(kept.dropped[0].run_at, at("2026-03-01T16:40:00Z"));
    assert_eq!(
        kept.dropped.last().map(|t| t.run_at),
        Some(at("2026-03-02T09:19:00Z")),
        "the newest dropped tick, just before the grace"
    );
}
