//! Every vector of `tests/data/calendar-vectors.json`: a cron spec in a zone with
//! exclusions, named calendars, `roll` and `dst_gap`/`dst_fold`, and its next ticks after
//! `after`. One vector (at least) per rule: exclusion by date, range, whole-day and
//! time-of-day cron, named calendar, rolling forward/backward (and collapsing), DST gap and
//! fold policies, including Australia/Lord_Howe (30-minute shift) and America/Havana
//! (transition at midnight).

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use kairos_core::{parse_date, parse_zone, Exclusion, Exclusions, NamedCalendar, Spec, Timetable};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Vector {
    rule: String,
    expr: String,
    tz: String,
    after: String,
    #[serde(default)]
    exclude: Vec<String>,
    #[serde(default)]
    calendars: BTreeMap<String, Vec<String>>,
    roll: Option<String>,
    dst_gap: Option<String>,
    dst_fold: Option<String>,
    expect: Vec<String>,
    note: String,
}

fn timetable(vector: &Vector) -> Timetable {
    let spec = Spec::parse(&vector.expr).expect("vector spec parses");
    let zone = parse_zone(&vector.tz).expect("vector zone");
    let after: DateTime<Utc> = vector.after.parse().expect("vector after");
    let entries = vector
        .exclude
        .iter()
        .map(|e| Exclusion::parse(e).expect("vector exclusion parses"))
        .collect();
    let calendars = vector
        .calendars
        .iter()
        .map(|(name, dates)| {
            let dates = dates.iter().map(|d| parse_date(d).expect("vector date"));
            Arc::new(NamedCalendar::new(name.clone(), dates).expect("calendar"))
        })
        .collect();
    Timetable::new(spec, zone, after)
        .exclude(Exclusions::new(entries, calendars))
        .roll(
            vector
                .roll
                .as_deref()
                .map_or(Default::default(), |r| r.parse().expect("vector roll")),
        )
        .dst(
            vector.dst_gap.as_deref().map(|g| g.parse().expect("gap")),
            vector.dst_fold.as_deref().map(|f| f.parse().expect("fold")),
        )
}

#[test]
fn calendar_vectors_pass() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/calendar-vectors.json"
    );
    let text = std::fs::read_to_string(path).expect("read calendar vectors");
    let vectors: Vec<Vector> = serde_json::from_str(&text).expect("valid JSON");
    assert!(vectors.len() >= 20, "too few vectors");
    let mut failures = Vec::new();
    for vector in &vectors {
        let after: DateTime<Utc> = vector.after.parse().expect("after");
        let got: Vec<String> = timetable(vector)
            .ticks_after(after)
            .take(3)
            .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
            .collect();
        if got != vector.expect {
            failures.push(format!(
                "[{}] {:?} in {} after {}: expected {:?}, got {:?} ({})",
                vector.rule, vector.expr, vector.tz, vector.after, vector.expect, got, vector.note
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "failing vectors:\n{}",
        failures.join("\n")
    );
}
