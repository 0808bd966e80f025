//! The integration tests of kairos-worker, in one test binary so that the tree is linked
//! once: each module is one file of `tests/`, and a test's name is `<file>::<test>`.

/// The name the test harness gives `$test` of the calling module, for a child process that
/// runs that test alone (`--exact`).
macro_rules! test_name {
    ($test:literal) => {
        concat!(module_path!(), "::", $test)
            .strip_prefix(concat!(env!("CARGO_CRATE_NAME"), "::"))
            .expect("a module of this test crate")
    };
}

mod attempts;
mod busy_schedules;
mod calendars;
mod cancel;
mod chains;
mod deadlines;
mod decide_ahead;
mod dispatcher;
mod dispatcher_bench;
mod dispatcher_status;
mod held_writes;
mod intake_kill;
mod lanes;
mod lifecycle_bugs;
mod lost_launches;
mod lost_tail;
mod max_in_flight;
mod max_runs;
mod metrics;
mod overlap_more;
mod overrides;
mod pause_until;
mod peer_bugs;
mod peer_bugs_crash;
mod peer_bugs_every;
mod planner;
mod planner_loop;
mod planner_race;
mod planner_wake;
mod prestage;
mod regions;
mod replicated;
mod retention;
mod skips;
mod skips_held;
mod status_batches;
mod unlaunched_deadlines;

mod dispatcher_support;
mod planner_support;
