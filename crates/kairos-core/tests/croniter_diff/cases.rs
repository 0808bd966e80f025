//! Cases (expression × zone × start) and the two sides: kairos and croniter.

use std::io::Write;
use std::process::{Command, Stdio};

use chrono::{DateTime, Duration, Offset, SecondsFormat, TimeZone, Utc};
use chrono_tz::Tz;
use kairos_core::{parse_zone, DstFold, DstGap, Spec, SpecError, Timetable};
use serde_json::{json, Value};

use super::*;

// ---------------------------------------------------------------------------------------
// Cases: expression × zone × start.

pub(crate) struct Case {
    pub(crate) expr: Expr,
    pub(crate) zone: &'static str,
    pub(crate) start: DateTime<Utc>,
}

/// The instants of 2025 and 2026 at which `zone`'s UTC offset changes (none for UTC): the
/// starts spread over two years of the zone's rules. Transitions
/// of these zones fall on whole quarter hours, so a 15-minute scan finds them exactly.
pub(crate) fn transitions(zone: Tz) -> Vec<DateTime<Utc>> {
    let offset = |t: DateTime<Utc>| zone.offset_from_utc_datetime(&t.naive_utc()).fix();
    let mut t = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
    let end = Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap();
    let mut found = Vec::new();
    while t < end {
        let next = t + Duration::minutes(15);
        if offset(next) != offset(t) {
            found.push(next);
        }
        t = next;
    }
    found
}

/// Starts: the new year, and just before each transition (10 s, 5 min, 30 min, 3 h,
/// 25 h and 8 days before), so that second-, minute-, hour- and day-level expressions
/// all cross one within their 20 fire times.
pub(crate) fn starts(zone: Tz) -> Vec<DateTime<Utc>> {
    let mut all = vec![
        Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap(),
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
    ];
    let mut at = transitions(zone);
    if at.is_empty() {
        // UTC has no transition; these are the northern ones, for the same spread.
        at = vec![
            Utc.with_ymd_and_hms(2025, 3, 30, 1, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(2025, 10, 26, 1, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(2026, 3, 29, 1, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(2026, 10, 25, 1, 0, 0).unwrap(),
        ];
    }
    for t in at {
        for before in [
            Duration::seconds(10),
            Duration::minutes(5),
            Duration::minutes(30),
            Duration::hours(3),
            Duration::hours(25),
            Duration::days(8),
        ] {
            all.push(t - before);
        }
    }
    all
}

pub(crate) fn cases(seed: u64, expressions: usize, zones: &[&'static str]) -> Vec<Case> {
    let mut rng = Rng(seed);
    let zone_starts: Vec<(&'static str, Vec<DateTime<Utc>>)> = zones
        .iter()
        .map(|z| (*z, starts(parse_zone(z).expect("zone"))))
        .collect();
    let mut cases = Vec::with_capacity(expressions * zones.len());
    for _ in 0..expressions {
        let expr = expression(&mut rng);
        for (zone, starts) in &zone_starts {
            let start = rng.pick(starts);
            cases.push(Case {
                expr: expr.clone(),
                zone,
                start,
            });
        }
    }
    cases
}

// ---------------------------------------------------------------------------------------
// The two sides.

pub(crate) type Series = Vec<DateTime<Utc>>;

/// kairos's first fire times after the start, with a DST policy or the defaults.
pub(crate) fn kairos(
    expr: &str,
    zone: Tz,
    start: DateTime<Utc>,
    dst: Option<(DstGap, DstFold)>,
) -> Result<Series, SpecError> {
    let spec = Spec::parse(expr)?;
    let mut timetable = Timetable::new(spec, zone, start);
    if let Some((gap, fold)) = dst {
        timetable = timetable.dst(Some(gap), Some(fold));
    }
    Ok(timetable.ticks_after(start).take(FIRES).collect())
}

pub(crate) fn manifest_path(relative: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// The croniter version `scripts/cron-diff.requirements.txt` pins.
pub(crate) fn pinned_croniter() -> String {
    let path = manifest_path("../../scripts/cron-diff.requirements.txt");
    let text = std::fs::read_to_string(&path).expect("scripts/cron-diff.requirements.txt");
    text.lines()
        .find_map(|line| line.trim().strip_prefix("croniter=="))
        .expect("croniter is pinned")
        .to_string()
}

/// Runs the oracle once for every case: croniter's series, or its error, per case.
pub(crate) fn croniter(cases: &[Case]) -> (String, Vec<Result<Series, String>>) {
    let batch = json!({
        "count": FIRES,
        "cases": cases.iter().map(|c| json!({
            "expr": c.expr.croniter,
            "zone": c.zone,
            "start": c.start.to_rfc3339_opts(SecondsFormat::Secs, true),
            "seconds_first": c.expr.seconds_first,
        })).collect::<Vec<_>>(),
    });
    let script = manifest_path("tests/croniter_oracle.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("python3 is needed to compare with croniter (scripts/cron-diff installs croniter): {e}")
        });
    // The oracle exits at once when croniter is missing; its message says why, so a
    // broken pipe here is reported only if the oracle itself succeeded.
    let written = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(batch.to_string().as_bytes());
    let output = child.wait_with_output().expect("the oracle ran");
    assert!(
        output.status.success(),
        "croniter_oracle.py failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    written.expect("write the batch to the oracle");
    let answer: Value = serde_json::from_slice(&output.stdout).expect("the oracle's JSON");
    let version = answer["croniter"].as_str().expect("version").to_string();
    let results = answer["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| match r["times"].as_array() {
            Some(times) => Ok(times
                .iter()
                .map(|t| t.as_str().expect("time").parse().expect("RFC 3339"))
                .collect()),
            None => Err(r["error"].as_str().unwrap_or("no error given").to_string()),
        })
        .collect();
    (version, results)
}
