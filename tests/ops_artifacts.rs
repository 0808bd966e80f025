//! The operations artifacts: `examples/prometheus/alerts.yml` is a well-formed
//! Prometheus rules file whose expressions parse as PromQL-ish (balanced, known functions
//! and keywords) and name only metrics kairos exports; `examples/grafana/kairos.json` is a
//! dashboard whose panels query those metrics; `docs/operations.md` explains every metric
//! and has a runbook section for every alert. `promtool` (Debian package `prometheus`)
//! accepts the rules file and passes its unit tests (`examples/prometheus/alerts.test.yml`).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value as Json;
use serde_yaml::Value as Yaml;

/// Every metric kairos exports that the artifacts may use (histograms: the base name).
const METRICS: [&str; 20] = [
    "kairos_fire_drift_seconds",
    "kairos_runs_planned_total",
    "kairos_runs_queued_total",
    "kairos_schedules_due",
    "kairos_runs_emitted_total",
    "kairos_runs_skipped_total",
    "kairos_runs_failed_launch_total",
    "kairos_runs_timed_out_total",
    "kairos_status_events_total",
    "kairos_outbox_pending",
    "kairos_outbox_oldest_seconds",
    "kairos_build_info",
    "kairos_run_retries_total",
    "kairos_runs_dead_lettered_total",
    "kairos_runs_republished_total",
    "kairos_runs_late_total",
    "kairos_runs_overdue",
    "kairos_region_ready",
    "kairos_runs_fallback_total",
    "kairos_runs_held_for_region_total",
];
const HISTOGRAMS: [&str; 1] = ["kairos_fire_drift_seconds"];

/// PromQL functions and aggregations the artifacts may call.
const FUNCTIONS: [&str; 17] = [
    "sum",
    "max",
    "min",
    "avg",
    "count",
    "rate",
    "irate",
    "increase",
    "delta",
    "histogram_quantile",
    "absent",
    "absent_over_time",
    "max_over_time",
    "min_over_time",
    "avg_over_time",
    "clamp_min",
    "topk",
];
/// Binary operator and modifier keywords.
const KEYWORDS: [&str; 6] = ["and", "or", "unless", "bool", "offset", "group_left"];
/// Keywords followed by a parenthesized label list.
const LABEL_LISTS: [&str; 4] = ["by", "without", "on", "ignoring"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

/// The metric names an expression selects. Panics (naming the expression) on unbalanced
/// brackets or quotes, an unknown function, or a bare name that is not a kairos metric.
fn metrics_of(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut found = BTreeSet::new();
    let mut stack = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' => {
                let close = chars[i + 1..]
                    .iter()
                    .position(|&d| d == c)
                    .unwrap_or_else(|| panic!("unterminated string in {expr:?}"));
                i += close + 2;
                continue;
            }
            '(' | '[' | '{' => stack.push(c),
            ')' | ']' | '}' => {
                let open = stack.pop();
                let expected = match c {
                    ')' => '(',
                    ']' => '[',
                    _ => '{',
                };
                assert_eq!(open, Some(expected), "unbalanced {c:?} in {expr:?}");
            }
            _ if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let inside = stack.last().copied();
                // Label names in matchers and durations in ranges are not names to check.
                if matches!(inside, Some('{') | Some('[')) {
                    continue;
                }
                let next = chars[i..].iter().find(|c| !c.is_whitespace());
                if LABEL_LISTS.contains(&word.as_str()) {
                    let open = chars[i..]
                        .iter()
                        .position(|&d| d == '(')
                        .unwrap_or_else(|| panic!("{word} without labels in {expr:?}"));
                    let close = chars[i + open..]
                        .iter()
                        .position(|&d| d == ')')
                        .unwrap_or_else(|| panic!("unclosed {word} list in {expr:?}"));
                    i += open + close + 1;
                } else if FUNCTIONS.contains(&word.as_str()) {
                    // A call, or an aggregation followed by `by (...)` / `without (...)`.
                } else if KEYWORDS.contains(&word.as_str()) {
                    // A binary operator (`and (...)`) or a modifier.
                } else if next == Some(&'(') {
                    panic!("unknown function {word:?} in {expr:?}");
                } else {
                    found.insert(word);
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    assert!(stack.is_empty(), "unclosed {stack:?} in {expr:?}");
    for name in &found {
        let base = HISTOGRAMS
            .iter()
            .find(|h| {
                ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|suffix| *name == format!("{h}{suffix}"))
            })
            .copied()
            .unwrap_or(name);
        assert!(
            METRICS.contains(&base),
            "{name:?} in {expr:?} is not a kairos metric"
        );
    }
    assert!(!found.is_empty(), "{expr:?} selects no metric");
    found
}

#[test]
fn the_expression_checker_refuses_what_it_should() {
    assert_eq!(
        metrics_of("histogram_quantile(0.99, sum by (le) (rate(kairos_fire_drift_seconds_bucket{job=\"k\"}[5m]))) > 1"),
        BTreeSet::from(["kairos_fire_drift_seconds_bucket".to_string()])
    );
    for bad in [
        "sum(rate(kairos_runs_emitted_total[5m])",
        "kairos_fires_total > 0",
        "frobnicate(kairos_outbox_pending)",
        "kairos_outbox_pending{reason=\"x}",
    ] {
        assert!(
            std::panic::catch_unwind(|| metrics_of(bad)).is_err(),
            "{bad:?} was accepted"
        );
    }
}

fn text<'a>(value: &'a Yaml, key: &str, what: &str) -> &'a str {
    value[key]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: `{key}` must be a string"))
}

/// Anchors of the `### Name` headings of docs/operations.md, GitHub style (lowercase).
fn doc_anchors(doc: &str) -> BTreeSet<String> {
    doc.lines()
        .filter_map(|line| line.strip_prefix("### "))
        .map(|title| title.trim().to_lowercase().replace(' ', "-"))
        .collect()
}

#[test]
fn alert_rules_are_well_formed_and_name_only_kairos_metrics() {
    let rules: Yaml =
        serde_yaml::from_str(&read("examples/prometheus/alerts.yml")).expect("alerts.yml is YAML");
    let doc = read("docs/operations.md");
    let anchors = doc_anchors(&doc);
    let groups = rules["groups"].as_sequence().expect("groups: a list");
    assert!(!groups.is_empty());
    let mut alerts = BTreeSet::new();
    let mut used = BTreeSet::new();
    for group in groups {
        let name = text(group, "name", "group");
        let list = group["rules"]
            .as_sequence()
            .unwrap_or_else(|| panic!("group {name}: rules must be a list"));
        assert!(!list.is_empty(), "group {name} has no rules");
        for rule in list {
            let keys: BTreeSet<&str> = rule
                .as_mapping()
                .expect("a rule is a mapping")
                .keys()
                .map(|k| k.as_str().expect("string keys"))
                .collect();
            let allowed = BTreeSet::from(["alert", "expr", "for", "labels", "annotations"]);
            assert!(keys.is_subset(&allowed), "rule keys {keys:?}");
            let alert = text(rule, "alert", "rule");
            assert!(
                alert.starts_with("Kairos") && alert.chars().all(|c| c.is_ascii_alphanumeric()),
                "alert name {alert:?}"
            );
            assert!(alerts.insert(alert.to_string()), "duplicate alert {alert}");
            used.extend(metrics_of(text(rule, "expr", alert)));
            if let Some(duration) = rule.get("for") {
                let duration = duration.as_str().expect("for: a string");
                let (number, unit) = duration.split_at(duration.len() - 1);
                assert!(
                    number.parse::<u32>().is_ok() && "smhdw".contains(unit),
                    "{alert}: for {duration:?}"
                );
            }
            let severity = text(&rule["labels"], "severity", alert);
            assert!(["info", "warning", "critical"].contains(&severity));
            text(&rule["annotations"], "summary", alert);
            let runbook = text(&rule["annotations"], "runbook", alert);
            let anchor = runbook
                .strip_prefix("docs/operations.md#")
                .unwrap_or_else(|| panic!("{alert}: runbook {runbook:?}"));
            assert_eq!(anchor, alert.to_lowercase(), "{alert}: runbook anchor");
            assert!(
                anchors.contains(anchor),
                "docs/operations.md has no ### {alert}"
            );
        }
    }
    // Every condition an operator is paged on has an alert.
    for metric in [
        "kairos_runs_skipped_total",
        "kairos_fire_drift_seconds_bucket",
        "kairos_outbox_pending",
        "kairos_outbox_oldest_seconds",
        "kairos_runs_failed_launch_total",
        "kairos_runs_timed_out_total",
        "kairos_runs_late_total",
        "kairos_runs_overdue",
    ] {
        assert!(used.contains(metric), "no alert on {metric}");
    }
}

/// `promtool` (Debian package `prometheus`, which scripts/test installs) accepts the rules
/// and passes their unit tests; a missing promtool fails, never skips.
#[test]
fn promtool_accepts_the_rules_and_their_tests_pass() {
    for (command, file) in [
        ("check", "examples/prometheus/alerts.yml"),
        ("test", "examples/prometheus/alerts.test.yml"),
    ] {
        let out = Command::new("promtool")
            .args([command, "rules"])
            .arg(root().join(file))
            .output()
            .expect("promtool runs (apt-get install prometheus; scripts/test installs it)");
        assert!(
            out.status.success(),
            "promtool {command} rules {file}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_dashboard_has_panels_over_kairos_metrics() {
    let dashboard: Json =
        serde_json::from_str(&read("examples/grafana/kairos.json")).expect("kairos.json is JSON");
    assert!(dashboard["title"].is_string() && dashboard["uid"].is_string());
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(panels.len() >= 6);
    let mut used = BTreeSet::new();
    let mut ids = BTreeSet::new();
    for panel in panels {
        let title = panel["title"].as_str().expect("panel title");
        assert!(
            ids.insert(panel["id"].as_i64().expect("panel id")),
            "{title}: id"
        );
        assert!(panel["type"].is_string(), "{title}: type");
        for key in ["x", "y", "w", "h"] {
            assert!(panel["gridPos"][key].is_u64(), "{title}: gridPos.{key}");
        }
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no targets");
        for target in targets {
            used.extend(metrics_of(target["expr"].as_str().expect("expr")));
        }
    }
    for metric in [
        "kairos_fire_drift_seconds_bucket",
        "kairos_runs_emitted_total",
        "kairos_runs_skipped_total",
        "kairos_runs_failed_launch_total",
        "kairos_outbox_pending",
        "kairos_outbox_oldest_seconds",
        "kairos_status_events_total",
    ] {
        assert!(used.contains(metric), "no panel on {metric}");
    }
}

#[test]
fn the_operations_guide_explains_every_metric() {
    let doc = read("docs/operations.md");
    for metric in METRICS {
        assert!(
            doc.contains(&format!("`{metric}")),
            "docs/operations.md: {metric}"
        );
    }
    for needle in [
        "retention_days",
        "keep_last",
        "stats.why",
        "kairos runs list",
    ] {
        assert!(doc.contains(needle), "docs/operations.md: {needle}");
    }
}
