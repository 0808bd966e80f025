//! The conformance and fault matrix (`conformance/matrix.toml`) stays true: every test it
//! names exists (and runs in `cargo test` unless its entry is marked `full`), every entry is
//! well formed, and `docs/conformance.md` is the page `scripts/conformance --markdown` writes
//! from it. The results themselves are checked by `scripts/conformance` in `.ci/run`, from
//! the output of the test and chaos runs CI does anyway.

use std::path::Path;
use std::process::{Command, Output};

fn conformance(args: &[&str]) -> Output {
    Command::new("python3")
        .arg("scripts/conformance")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("python3 runs scripts/conformance")
}

fn said(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn every_named_test_exists_and_the_published_page_is_current() {
    let output = conformance(&["--check"]);
    assert!(output.status.success(), "{}", said(&output));
}

/// The check is not a formality: a matrix naming a test that does not exist, a test that
/// `cargo test` ignores in an entry not marked `full`, an unknown chaos scenario or a doc
/// section that does not exist is refused, each named.
#[test]
fn a_matrix_naming_what_does_not_exist_is_refused() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let matrix = dir.path().join("matrix.toml");
    std::fs::write(
        &matrix,
        r#"
groups = ["Invariants"]

[[guarantee]]
id = "made-up"
group = "Invariants"
promise = "Names a test nobody wrote."
doc = "docs/design.md#2-invariants"
tests = ["kairos-worker::planner_race::a_test_nobody_wrote"]

[[guarantee]]
id = "slow-but-not-marked"
group = "Invariants"
promise = "Names an ignored test without full = true."
doc = "docs/design.md#2-invariants"
tests = ["kairos-worker::planner_loop::planner_throughput_10k_schedules_every_minute"]

[[guarantee]]
id = "bad-chaos-and-doc"
group = "Invariants"
promise = "Names a chaos scenario and a section that do not exist."
doc = "docs/design.md#no-such-section"
tests = ["chaos::meteor_strike"]

[[guarantee]]
id = "bad-drill"
group = "Invariants"
promise = "Names a region drill that does not exist."
doc = "docs/design.md#2-invariants"
tests = ["regions::drill9"]
"#,
    )
    .expect("write the matrix");
    let output = conformance(&["--check", "--matrix", matrix.to_str().expect("utf-8 path")]);
    assert!(!output.status.success(), "{}", said(&output));
    let said = said(&output);
    for expected in [
        "made-up: test kairos-worker::planner_race::a_test_nobody_wrote does not exist",
        "slow-but-not-marked: kairos-worker::planner_loop::planner_throughput_10k_schedules_every_minute is #[ignore]d",
        "bad-chaos-and-doc: no chaos scenario 'meteor_strike'",
        "bad-chaos-and-doc: doc 'docs/design.md#no-such-section' names no section",
        "bad-drill: no region drill 'drill9'",
    ] {
        assert!(said.contains(expected), "{expected:?} not in:\n{said}");
    }
}

/// A region drill is judged from its table in the regions run: it passes when every check of
/// that drill passed, fails on one failed check, and is missing without its table.
#[test]
fn a_region_drill_is_judged_from_its_table() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let matrix = dir.path().join("matrix.toml");
    std::fs::write(
        &matrix,
        r#"
groups = ["Fault scenarios"]

[[guarantee]]
id = "cut"
group = "Fault scenarios"
promise = "Drill 2."
doc = "docs/regions.md#the-five-region-test-bed-and-its-drills"
tests = ["regions::drill2"]
"#,
    )
    .expect("write the matrix");
    let table = |verdict: &str| {
        format!(
            "drill 2: cut ap, 60 s, RTT 30 ms; 220 schedules\n\
             \x20 no key received twice     PASS  0 of 100 keys in two messages\n\
             \x20 surviving launches <= 5 s  {verdict}  every launch in time\n"
        )
    };
    let judged = |log: &str| {
        let path = dir.path().join("regions.log");
        std::fs::write(&path, log).expect("write the log");
        conformance(&[
            "--matrix",
            matrix.to_str().expect("utf-8 path"),
            "--regions-log",
            path.to_str().expect("utf-8 path"),
        ])
    };
    let passed = judged(&table("PASS"));
    assert!(passed.status.success(), "{}", said(&passed));
    assert!(
        said(&passed).contains("2 checks passed"),
        "{}",
        said(&passed)
    );
    let failed = judged(&table("FAIL"));
    assert!(!failed.status.success(), "{}", said(&failed));
    assert!(
        said(&failed).contains("surviving launches <= 5 s: every launch in time"),
        "{}",
        said(&failed)
    );
    let missing = judged("drill 1: kill ap\n  no tick lost  PASS  0 of 10 ticks\n");
    assert!(!missing.status.success(), "{}", said(&missing));
    assert!(
        said(&missing).contains("drill2: no table in the regions run"),
        "{}",
        said(&missing)
    );
}

/// `.ci/run` checks the matrix against the results of its own test, chaos and drill runs.
#[test]
fn ci_checks_the_matrix_against_its_test_and_chaos_runs() {
    let ci = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/run"))
        .expect("read .ci/run");
    let start = ci
        .find("\nscripts/conformance ")
        .expect(".ci/run runs scripts/conformance");
    let step: String = ci[start + 1..]
        .split_inclusive('\n')
        .scan(true, |more, line| {
            let take = *more;
            *more = line.trim_end().ends_with('\\');
            take.then(|| line.to_string())
        })
        .collect();
    assert!(
        step.contains("--cargo-log")
            && step.contains("--chaos-log")
            && step.contains("--regions-log"),
        "{step}"
    );
    assert!(
        ci.contains("scripts/regions ci | tee "),
        "the drill run is kept"
    );
    assert!(
        ci.contains("scripts/test 2>&1 | tee "),
        "the test run is kept"
    );
    assert!(
        ci.contains("scripts/chaos --ci | tee "),
        "the chaos run is kept"
    );
}
