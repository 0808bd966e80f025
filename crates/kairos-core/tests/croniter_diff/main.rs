//! kairos's cron evaluation compared with an independent implementation, Python's
//! `croniter` (pinned in `scripts/cron-diff.requirements.txt`), on random expressions.
//!
//! The property tests elsewhere compare the evaluator with oracles built on the same parsed
//! fields, so they cannot catch a misreading of the text itself (`0 0 * * WED` was refused
//! for years). Here a seeded generator writes valid 5- and 6-field expressions (values,
//! ranges, steps, lists, month and weekday names in every position and in mixed case, `L`,
//! `W`, `#`), each is evaluated in UTC and in DST zones from starts placed just before
//! the zones' transitions, and kairos's 20 fire times are compared with croniter's (computed
//! by `croniter_oracle.py`, one Python run for the whole batch).
//!
//! Every difference must be one of the deliberate rules of [`Rule`], each listed with an
//! example in `docs/time.md` ("Compared with croniter"). The classifier recognises a rule
//! precisely (a refusal by its error and its form; a DST rule by re-evaluating kairos with
//! croniter's DST policy and checking that every instant that changed is at a transition
//! of the zone); anything else fails the test with the expression, zone and both series.
//!
//! `cronie.rs` compares the 5-field expressions with cronie's matching rules as well.
//!
//! Starts lie just before every DST transition of 2025 and 2026 in each zone (and at each
//! new year), so the cases cover two years of each zone's rules.
//!
//! Runs: `cargo test -p kairos-core --test croniter_diff` (1,000 expressions × 5 zones);
//! `KAIROS_CRON_DIFF_FULL=1` for 10,000 × 5 zones; `scripts/cron-diff [--full]` installs
//! croniter first and prints the summary. Without python3 or croniter the test fails.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use chrono::SecondsFormat;
use kairos_core::parse_zone;

mod cases;
mod classify;
mod cronie;
mod generate;
mod rule;

use cases::*;
use classify::*;
use generate::*;
use rule::*;

/// Fire times compared per expression and zone.
pub(crate) const FIRES: usize = 20;
/// The generator's seed; `KAIROS_CRON_DIFF_SEED` replaces it (to explore, not in CI).
pub(crate) const SEED: u64 = 0x6b61_6972_6f73_0030;
pub(crate) const CI_EXPRESSIONS: usize = 1_000;
pub(crate) const FULL_EXPRESSIONS: usize = 10_000;
/// UTC and four zones with DST: a northern, a European, one that moves by 30 minutes, and
/// Havana, whose clocks jump at midnight.
pub(crate) const CI_ZONES: &[&str] = FULL_ZONES;
/// The same zones in the full run (more expressions).
pub(crate) const FULL_ZONES: &[&str] = &[
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "America/Havana",
];

// ---------------------------------------------------------------------------------------

#[test]
fn kairos_agrees_with_croniter_except_by_its_documented_rules() {
    let full = std::env::var("KAIROS_CRON_DIFF_FULL").is_ok_and(|v| v == "1");
    let seed = std::env::var("KAIROS_CRON_DIFF_SEED")
        .ok()
        .map_or(SEED, |s| {
            s.parse().expect("KAIROS_CRON_DIFF_SEED is a number")
        });
    let (expressions, zones) = if full {
        (FULL_EXPRESSIONS, FULL_ZONES)
    } else {
        (CI_EXPRESSIONS, CI_ZONES)
    };

    // Every rule the classifier knows is documented, with its example.
    let docs = include_str!("../../../../docs/time.md");
    let section = docs
        .split("## Compared with croniter")
        .nth(1)
        .expect("docs/time.md has a section \"Compared with croniter\"");
    for rule in Rule::ALL {
        let (expr, zone, _) = rule.example();
        assert!(
            section.contains(&format!("`{expr}`")) && section.contains(zone),
            "docs/time.md \"Compared with croniter\" lacks {rule:?}'s example `{expr}` ({zone})"
        );
    }

    let started = Instant::now();
    let cases = cases(seed, expressions, zones);
    let (version, theirs) = croniter(&cases);
    let oracle_time = started.elapsed();
    assert_eq!(
        version,
        pinned_croniter(),
        "croniter {version} is installed; the comparison is set for the version pinned in \
         scripts/cron-diff.requirements.txt (scripts/cron-diff installs it)"
    );

    let ours_started = Instant::now();
    let mut identical = 0;
    let mut both_refuse = Vec::new();
    let mut per_rule: BTreeMap<Rule, BTreeMap<&str, usize>> = BTreeMap::new();
    let mut unexplained = Vec::new();
    let mut per_zone: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (case, theirs) in cases.iter().zip(&theirs) {
        let zone = parse_zone(case.zone).expect("zone");
        let ours = kairos(&case.expr.kairos, zone, case.start, None);
        let entry = per_zone.entry(case.zone).or_default();
        entry.0 += 1;
        match outcome(case, &ours, theirs) {
            Outcome::Identical => {
                identical += 1;
                entry.1 += 1;
            }
            Outcome::BothRefuse => both_refuse.push(case.expr.kairos.as_str()),
            Outcome::Deliberate(rules) => {
                for rule in rules {
                    *per_rule
                        .entry(rule)
                        .or_default()
                        .entry(case.zone)
                        .or_default() += 1;
                }
            }
            Outcome::Unexplained(text) => unexplained.push(text),
        }
    }

    println!(
        "croniter {version}, seed {seed:#x}: {expressions} expressions x {} zones = {} cases, \
         {FIRES} fire times each",
        zones.len(),
        cases.len()
    );
    println!("  identical: {identical}");
    for (zone, (all, same)) in &per_zone {
        println!("    {zone}: {same} of {all} identical");
    }
    both_refuse.dedup();
    println!(
        "  both refuse: {} expression(s), e.g. {:?}",
        both_refuse.len(),
        &both_refuse[..both_refuse.len().min(3)]
    );
    println!("  differences by deliberate rule (cases; a case may show several):");
    for rule in Rule::ALL {
        let zones = per_rule.get(&rule);
        let total: usize = zones.map_or(0, |z| z.values().sum());
        let by_zone = zones.map_or(String::new(), |z| {
            z.iter()
                .map(|(zone, n)| format!("{zone} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        });
        println!(
            "    {rule:?} (e.g. `{}`): {total}{}",
            rule.example().0,
            if total > 0 {
                format!(" ({by_zone})")
            } else {
                String::new()
            }
        );
    }
    println!("  unexplained: {}", unexplained.len());
    println!(
        "  time: croniter {:.1} s, kairos and classification {:.1} s",
        oracle_time.as_secs_f64(),
        ours_started.elapsed().as_secs_f64()
    );
    assert!(
        unexplained.is_empty(),
        "{} case(s) differ from croniter by no documented rule; the first ones:\n{}",
        unexplained.len(),
        unexplained
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The comparison compared something: most cases agree outright.
    assert!(
        identical * 2 > cases.len(),
        "only {identical} of {} identical",
        cases.len()
    );
}

#[test]
fn the_generator_writes_every_form_it_promises() {
    // Names of both kinds in every position, mixed case, steps, lists, `L`, `W`, `#`.
    let mut rng = Rng(SEED);
    let exprs: Vec<Expr> = (0..CI_EXPRESSIONS).map(|_| expression(&mut rng)).collect();
    let any = |p: &dyn Fn(&Expr) -> bool| exprs.iter().any(p);
    let dow = |e: &Expr| e.kairos.split_whitespace().last().unwrap_or("").to_string();
    let month = |e: &Expr| {
        let f: Vec<&str> = e.kairos.split_whitespace().collect();
        f[f.len() - 2].to_string()
    };
    assert!(any(&|e| dow(e).eq_ignore_ascii_case("wed")));
    assert!(any(&|e| dow(e).contains("wed")));
    assert!(any(&|e| dow(e).to_ascii_uppercase().contains("WED-")));
    assert!(any(&|e| dow(e).to_ascii_uppercase().contains("-WED")));
    assert!(any(&|e| dow(e).to_ascii_uppercase().contains("WED#")));
    assert!(any(
        &|e| dow(e).contains(',') && dow(e).to_ascii_uppercase().contains("WED")
    ));
    assert!(any(
        &|e| dow(e).contains('/') && dow(e).chars().any(|c| c.is_ascii_alphabetic())
    ));
    assert!(any(&|e| dow(e).ends_with('L')));
    assert!(any(&|e| month(e).to_ascii_uppercase().contains("JUL")));
    assert!(any(&|e| month(e).to_ascii_uppercase().contains("JUL-")));
    assert!(any(
        &|e| month(e).contains(',') && month(e).chars().any(|c| c.is_ascii_alphabetic())
    ));
    let dom = |e: &Expr| {
        let f: Vec<&str> = e.kairos.split_whitespace().collect();
        f[f.len() - 3].to_string()
    };
    assert!(any(&|e| dom(e).ends_with('W')));
    assert!(any(&|e| dom(e) == "L" && dow(e) != "*" && dow(e) != "?"));
    assert!(any(&|e| e.seconds_first));
    assert!(any(&|e| !e.seconds_first));
    assert!(any(&|e| e.kairos.contains('?')));
    assert!(any(&|e| e.kairos.contains("*/")));
}

#[test]
fn each_documented_example_differs_by_its_rule() {
    let rules = Rule::ALL;
    let cases: Vec<Case> = rules
        .iter()
        .map(|rule| {
            let (expr, zone, start) = rule.example();
            Case {
                expr: Expr {
                    kairos: expr.to_string(),
                    croniter: expr.to_string(),
                    seconds_first: expr.split_whitespace().count() == 6,
                },
                zone,
                start: start.parse().expect("RFC 3339"),
            }
        })
        .collect();
    let (_, theirs) = croniter(&cases);
    for ((rule, case), theirs) in rules.iter().zip(&cases).zip(&theirs) {
        let zone = parse_zone(case.zone).expect("zone");
        let ours = kairos(&case.expr.kairos, zone, case.start, None);
        let show_side =
            |side: Result<String, String>| side.unwrap_or_else(|e| format!("refused: {e}"));
        println!(
            "{rule:?} `{}` in {} after {}:\n  kairos:   {}\n  croniter: {}",
            case.expr.kairos,
            case.zone,
            case.start.to_rfc3339_opts(SecondsFormat::Secs, true),
            show_side(
                ours.as_ref()
                    .map(|s| show(&s[..s.len().min(4)], zone))
                    .map_err(|e| e.to_string())
            ),
            show_side(
                theirs
                    .as_ref()
                    .map(|s| show(&s[..s.len().min(4)], zone))
                    .map_err(Clone::clone)
            ),
        );
        match outcome(case, &ours, theirs) {
            Outcome::Deliberate(found) => assert_eq!(
                found,
                BTreeSet::from([*rule]),
                "{rule:?}'s example shows other rules"
            ),
            Outcome::Unexplained(text) => panic!("{rule:?}'s example: {text}"),
            Outcome::Identical | Outcome::BothRefuse => {
                panic!("{rule:?}'s example does not differ from croniter")
            }
        }
    }
}
