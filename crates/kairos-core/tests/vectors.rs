//! Every vector of `shared/cron-vectors.json` (expression, zone, `after`, next three ticks).
//!
//! A committed copy is always checked; when the shared file sits beside the repository (as
//! on developer machines and in CI) it is checked too, so the two cannot drift apart.

use std::path::PathBuf;

use chrono::{DateTime, SecondsFormat, Utc};
use kairos_core::{parse_zone, Spec, Timetable};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Vector {
    expr: String,
    tz: String,
    after: String,
    expect: Vec<String>,
    note: String,
}

fn load(path: &PathBuf) -> Vec<Vector> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path:?}: {e}"));
    serde_json::from_str(&text).expect("vectors are valid JSON")
}

fn ticks(vector: &Vector) -> Result<Vec<String>, String> {
    let spec = Spec::parse(&vector.expr).map_err(|e| e.to_string())?;
    let zone = parse_zone(&vector.tz).expect("vector zones are IANA names");
    let after: DateTime<Utc> = vector.after.parse().expect("vector `after` is RFC 3339");
    let timetable = Timetable::new(spec, zone, after);
    Ok(timetable
        .ticks_after(after)
        .take(vector.expect.len().max(3))
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
        .collect())
}

fn check_all(vectors: &[Vector]) {
    assert!(!vectors.is_empty(), "no vectors loaded");
    let mut failures = Vec::new();
    for vector in vectors {
        match ticks(vector) {
            // A never-firing expression may be rejected at parse time or yield nothing.
            Err(_) if vector.expect.is_empty() => {}
            Ok(got) if got == vector.expect => {}
            got => failures.push(format!(
                "{:?} in {} after {}: expected {:?}, got {:?} ({})",
                vector.expr, vector.tz, vector.after, vector.expect, got, vector.note
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "failing vectors:\n{}",
        failures.join("\n")
    );
}

#[test]
fn committed_vectors_pass() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/cron-vectors.json");
    check_all(&load(&path));
}

#[test]
fn shared_vectors_pass_and_match_the_committed_copy() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let shared = root.join("../shared/cron-vectors.json");
    if !shared.exists() {
        eprintln!("{shared:?} not present; the committed copy is checked by another test");
        return;
    }
    let vectors = load(&shared);
    check_all(&vectors);
    let committed = load(&root.join("crates/kairos-core/tests/data/cron-vectors.json"));
    let key = |v: &Vector| {
        (
            v.expr.clone(),
            v.tz.clone(),
            v.after.clone(),
            v.expect.clone(),
        )
    };
    let shared_keys: Vec<_> = vectors.iter().map(key).collect();
    let committed_keys: Vec<_> = committed.iter().map(key).collect();
    assert_eq!(
        shared_keys, committed_keys,
        "copy the shared vectors into tests/data"
    );
}
