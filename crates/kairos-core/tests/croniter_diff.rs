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
//! Runs: `cargo test -p kairos-core --test croniter_diff` (1,000 expressions × 4 zones);
//! `KAIROS_CRON_DIFF_FULL=1` for 10,000 × 5 zones; `scripts/cron-diff [--full]` installs
//! croniter first and prints the summary. Without python3 or croniter the test fails.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;

use chrono::{DateTime, Duration, LocalResult, Offset, SecondsFormat, TimeZone, Utc};
use chrono_tz::Tz;
use kairos_core::{parse_zone, DstFold, DstGap, JobKind, Spec, SpecError, Timetable};
use serde_json::{json, Value};

/// Fire times compared per expression and zone.
const FIRES: usize = 20;
/// The generator's seed; `KAIROS_CRON_DIFF_SEED` replaces it (to explore, not in CI).
const SEED: u64 = 0x6b61_6972_6f73_0030;
const CI_EXPRESSIONS: usize = 1_000;
const FULL_EXPRESSIONS: usize = 10_000;
/// UTC and three zones with DST: a northern, a European and one that moves by 30 minutes.
const CI_ZONES: &[&str] = &[
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
];
/// The full run adds Havana, whose clocks jump at midnight.
const FULL_ZONES: &[&str] = &[
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "America/Havana",
];

// ---------------------------------------------------------------------------------------
// The deliberate differences.

/// A difference between kairos and croniter that kairos makes on purpose. Each is listed,
/// with its example, in docs/time.md "Compared with croniter".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Rule {
    /// kairos refuses a day field that starts with `*` but is not `*` beside a restricted
    /// other day field (implementations disagree: croniter ORs them, Vixie ANDs them).
    StarDayField,
    /// kairos refuses `a/n` (implementations disagree on where it ends; croniter reads
    /// `a-max/n`).
    ShortStep,
    /// kairos refuses a range written high to low; croniter wraps it around the field.
    BackwardRange,
    /// A range whose ends are equal is that one value in kairos, the whole field in croniter.
    EqualRange,
    /// A day field that lists every day (`1-31`, `SUN-SAT`) is a restriction in kairos
    /// (only `*` and `?` are not), ORed with a restricted other day field; croniter reads
    /// it as `*` when the other day field holds a `*`, so only the other one counts.
    FullDayField,
    /// Fall back, fixed-time job: kairos fires at the first occurrence of a repeated wall
    /// time only; croniter at both.
    FixedTimeFold,
    /// Spring forward: kairos shifts a fixed-time job's missing wall time to the jump and
    /// skips a wildcard job's (a time field starting with `*`); croniter skips when the
    /// hour field covers every hour and shifts otherwise.
    GapByJobKind,
    /// Spring forward, shifted time with seconds: kairos fires at the instant of the jump;
    /// croniter moves the wall time a minute at a time and keeps its seconds.
    GapSecondsKept,
    /// Fall back, wildcard job: kairos fires at both occurrences of a repeated wall time;
    /// croniter, where the clocks go back 30 minutes (Lord Howe), drops the second
    /// occurrence of the times it reaches by carrying the offset change over from before
    /// the fold.
    WildcardFold,
}

impl Rule {
    const ALL: [Rule; 9] = [
        Rule::StarDayField,
        Rule::ShortStep,
        Rule::BackwardRange,
        Rule::EqualRange,
        Rule::FullDayField,
        Rule::FixedTimeFold,
        Rule::GapByJobKind,
        Rule::GapSecondsKept,
        Rule::WildcardFold,
    ];

    /// The example docs/time.md gives for the rule (the test checks it is there, and that
    /// it differs from croniter by this rule), with the zone and start that show it.
    fn example(self) -> (&'static str, &'static str, &'static str) {
        const UTC_2025: &str = "2025-01-01T00:00:00Z";
        match self {
            Rule::StarDayField => ("0 0 */2 * MON", "UTC", UTC_2025),
            Rule::ShortStep => ("5/15 * * * *", "UTC", UTC_2025),
            Rule::BackwardRange => ("0 0 * * FRI-MON", "UTC", UTC_2025),
            Rule::EqualRange => ("5-5 * * * *", "UTC", UTC_2025),
            Rule::FullDayField => ("0 0 1-31 * MON,*/3", "UTC", UTC_2025),
            Rule::FixedTimeFold => ("30 1 * * *", "America/New_York", "2025-11-01T12:00:00Z"),
            Rule::GapByJobKind => ("0 */2 * * *", "America/New_York", "2025-03-09T05:00:00Z"),
            Rule::GapSecondsKept => ("30 30 2 * * *", "America/New_York", "2025-03-08T12:00:00Z"),
            Rule::WildcardFold => (
                "16-50 * * * *",
                "Australia/Lord_Howe",
                "2025-04-05T14:55:00Z",
            ),
        }
    }
}

// ---------------------------------------------------------------------------------------
// A tiny deterministic generator (SplitMix64): the same seed gives the same expressions on
// every machine, without a dependency.

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn between(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next() % u64::from(hi - lo + 1)) as u32
    }

    fn percent(&mut self, p: u32) -> bool {
        self.between(0, 99) < p
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.between(0, items.len() as u32 - 1) as usize]
    }

    /// An index drawn with the given weights.
    fn weighted(&mut self, weights: &[u32]) -> usize {
        let mut roll = self.between(0, weights.iter().sum::<u32>() - 1);
        for (i, w) in weights.iter().enumerate() {
            if roll < *w {
                return i;
            }
            roll -= w;
        }
        weights.len() - 1
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Second,
    Minute,
    Hour,
    Dom,
    Month,
    Dow,
}

impl Field {
    /// The values the generator draws (`7` is drawn for Sunday only as a range end).
    fn bounds(self) -> (u32, u32) {
        match self {
            Field::Second | Field::Minute => (0, 59),
            Field::Hour => (0, 23),
            Field::Dom => (1, 31),
            Field::Month => (1, 12),
            Field::Dow => (0, 6),
        }
    }

    /// The field as croniter spans it (a range with equal ends widens to this).
    fn croniter_span(self) -> (u32, u32) {
        self.bounds()
    }
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// A name in upper, lower, title or random case.
fn any_case(rng: &mut Rng, name: &str) -> String {
    match rng.between(0, 3) {
        0 => name.to_string(),
        1 => name.to_ascii_lowercase(),
        2 => name[..1].to_string() + &name[1..].to_ascii_lowercase(),
        _ => name
            .chars()
            .map(|c| {
                if rng.percent(50) {
                    c.to_ascii_lowercase()
                } else {
                    c
                }
            })
            .collect(),
    }
}

/// A value as written: a number, or for months and weekdays often a name. A Sunday that
/// ends a range is written `7` or `SUN` (both mean 7 there).
fn written(rng: &mut Rng, field: Field, n: u32) -> String {
    match field {
        Field::Month if rng.percent(50) => any_case(rng, MONTHS[n as usize - 1]),
        Field::Dow if n == 7 && rng.percent(50) => any_case(rng, "SUN"),
        Field::Dow if n < 7 && rng.percent(50) => any_case(rng, DAYS[n as usize]),
        _ => n.to_string(),
    }
}

/// A value, with the hours and minutes around DST transitions drawn more often.
fn value(rng: &mut Rng, field: Field) -> u32 {
    let (lo, hi) = field.bounds();
    match field {
        Field::Hour if rng.percent(50) => rng.between(0, 4),
        Field::Minute | Field::Second if rng.percent(30) => rng.pick(&[0, 15, 30, 45]),
        _ => rng.between(lo, hi),
    }
}

/// One list item of a field: a value, a range (mostly low to high; sometimes with equal
/// ends, sometimes backwards, which kairos refuses), or a stepped range.
fn item(rng: &mut Rng, field: Field) -> String {
    let (lo, hi) = field.bounds();
    // A weekday range may end on 7 (Sunday), so `FRI-SUN` and `5-7` come up.
    let top = if field == Field::Dow { 7 } else { hi };
    // Weights: value, range, stepped range, `*/n`, and now and then an `a/n`.
    match rng.weighted(&[400, 240, 112, 24, 3]) {
        0 => {
            let n = value(rng, field);
            written(rng, field, n)
        }
        kind @ (1 | 2) => {
            let start = value(rng, field).min(top - 1);
            let end = if rng.percent(3) {
                start
            } else if rng.percent(1) && start > lo {
                rng.between(lo, start - 1)
            } else {
                rng.between(start + 1, top)
            };
            let range = format!(
                "{}-{}",
                written(rng, field, start),
                written(rng, field, end)
            );
            if kind == 1 {
                range
            } else {
                format!("{range}/{}", rng.between(2, 7))
            }
        }
        3 => star_step(rng, field),
        _ => {
            // `a/n`: kairos refuses it by design.
            let n = value(rng, field);
            format!(
                "{}/{}",
                written(rng, field, n),
                rng.between(2, (hi - lo + 1).min(10))
            )
        }
    }
}

/// `*/n`, with `n` at most half the field (so it fires more than once per cycle).
fn star_step(rng: &mut Rng, field: Field) -> String {
    let (lo, hi) = field.bounds();
    format!("*/{}", rng.between(2, (hi - lo).div_ceil(2).min(12)))
}

/// A whole field: `*` with the given weight, else a list of 1 to 4 items.
fn field_text(rng: &mut Rng, field: Field, star_percent: u32) -> String {
    if rng.percent(star_percent) {
        return "*".into();
    }
    if rng.percent(8) {
        return star_step(rng, field);
    }
    let count = rng.pick(&[1, 1, 1, 2, 2, 3, 4]);
    (0..count)
        .map(|_| item(rng, field))
        .collect::<Vec<_>>()
        .join(",")
}

/// A generated expression: as kairos reads it and as croniter spells the same thing (they
/// differ only in the last-weekday form: kairos `5L` or `FRI#L`, croniter `L5`).
#[derive(Debug, Clone)]
struct Expr {
    kairos: String,
    croniter: String,
    seconds_first: bool,
}

/// The day fields. croniter cannot combine `#`/`L` in day-of-week or `W` in day-of-month
/// with a restricted other day field (it drops the other field, or finds no date), so those
/// forms come only beside `*` or `?`; that is a limit of the comparison, not a rule.
fn day_fields(rng: &mut Rng) -> (String, String, String) {
    let free = |rng: &mut Rng| if rng.percent(85) { "*" } else { "?" }.to_string();
    match rng.weighted(&[80, 7, 4, 5, 4]) {
        0 => {
            let dom = field_text(rng, Field::Dom, 55);
            let dow = field_text(rng, Field::Dow, 50);
            let dom = if dom == "*" && rng.percent(10) {
                "?".into()
            } else {
                dom
            };
            (dom.clone(), dow.clone(), dow)
        }
        1 => {
            // `d#n`, `d#L`, `dL`, alone or two of them.
            let count = rng.pick(&[1, 1, 2]);
            let mut kairos = Vec::new();
            let mut croniter = Vec::new();
            for _ in 0..count {
                let day = rng.between(0, 6);
                match rng.weighted(&[60, 20, 20]) {
                    0 => {
                        let nth = rng.between(1, 5);
                        let text = format!("{}#{nth}", written(rng, Field::Dow, day));
                        kairos.push(text.clone());
                        croniter.push(text);
                    }
                    1 => {
                        kairos.push(format!("{}#L", written(rng, Field::Dow, day)));
                        croniter.push(format!("L{day}"));
                    }
                    _ => {
                        kairos.push(format!("{day}L"));
                        croniter.push(format!("L{day}"));
                    }
                }
            }
            (free(rng), kairos.join(","), croniter.join(","))
        }
        2 => {
            let day = rng.between(1, 28);
            let dow = free(rng);
            (format!("{day}W"), dow.clone(), dow)
        }
        3 => {
            // `L` beside a restricted weekday field: both read it as either/or.
            let dow = field_text(rng, Field::Dow, 30);
            ("L".into(), dow.clone(), dow)
        }
        _ => {
            let dow = free(rng);
            ("L".into(), dow.clone(), dow)
        }
    }
}

fn expression(rng: &mut Rng) -> Expr {
    let seconds_first = rng.percent(30);
    let second = seconds_first.then(|| field_text(rng, Field::Second, 25));
    let minute = field_text(rng, Field::Minute, 15);
    let hour = field_text(rng, Field::Hour, 25);
    let (dom, dow_kairos, dow_croniter) = day_fields(rng);
    let month = field_text(rng, Field::Month, 55);
    let join = |dow: &str| {
        let tail = format!("{minute} {hour} {dom} {month} {dow}");
        match &second {
            Some(second) => format!("{second} {tail}"),
            None => tail,
        }
    };
    Expr {
        kairos: join(&dow_kairos),
        croniter: join(&dow_croniter),
        seconds_first,
    }
}

// ---------------------------------------------------------------------------------------
// Cases: expression × zone × start.

struct Case {
    expr: Expr,
    zone: &'static str,
    start: DateTime<Utc>,
}

/// The instants of 2025 at which `zone`'s UTC offset changes (none for UTC). Transitions
/// of these zones fall on whole quarter hours, so a 15-minute scan finds them exactly.
fn transitions(zone: Tz) -> Vec<DateTime<Utc>> {
    let offset = |t: DateTime<Utc>| zone.offset_from_utc_datetime(&t.naive_utc()).fix();
    let mut t = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
    let end = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
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
fn starts(zone: Tz) -> Vec<DateTime<Utc>> {
    let mut all = vec![Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap()];
    let mut at = transitions(zone);
    if at.is_empty() {
        // UTC has no transition; these are the northern ones, for the same spread.
        at = vec![
            Utc.with_ymd_and_hms(2025, 3, 30, 1, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(2025, 10, 26, 1, 0, 0).unwrap(),
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

fn cases(seed: u64, expressions: usize, zones: &[&'static str]) -> Vec<Case> {
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

type Series = Vec<DateTime<Utc>>;

/// kairos's first fire times after the start, with a DST policy or the defaults.
fn kairos(
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

fn manifest_path(relative: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// The croniter version `scripts/cron-diff.requirements.txt` pins.
fn pinned_croniter() -> String {
    let path = manifest_path("../../scripts/cron-diff.requirements.txt");
    let text = std::fs::read_to_string(&path).expect("scripts/cron-diff.requirements.txt");
    text.lines()
        .find_map(|line| line.trim().strip_prefix("croniter=="))
        .expect("croniter is pinned")
        .to_string()
}

/// Runs the oracle once for every case: croniter's series, or its error, per case.
fn croniter(cases: &[Case]) -> (String, Vec<Result<Series, String>>) {
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

// ---------------------------------------------------------------------------------------
// Comparison and classification.

/// Whether two series agree on every instant both cover: each may stop early (20 times
/// reach further in one than in the other when they differ), so the comparison ends at
/// the earlier of the two last times; a series shorter than 20 has ended and covers all.
fn same(a: &[DateTime<Utc>], b: &[DateTime<Utc>]) -> bool {
    let (only_a, only_b) = differing(a, b);
    only_a.is_empty() && only_b.is_empty()
}

/// The instants, within what both cover, that only `a` has and that only `b` has.
fn differing(a: &[DateTime<Utc>], b: &[DateTime<Utc>]) -> (Vec<DateTime<Utc>>, Vec<DateTime<Utc>>) {
    let end = |s: &[DateTime<Utc>]| {
        if s.len() < FIRES {
            DateTime::<Utc>::MAX_UTC
        } else {
            s[s.len() - 1]
        }
    };
    let until = end(a).min(end(b));
    let a: BTreeSet<_> = a.iter().copied().filter(|t| *t <= until).collect();
    let b: BTreeSet<_> = b.iter().copied().filter(|t| *t <= until).collect();
    (
        a.difference(&b).copied().collect(),
        b.difference(&a).copied().collect(),
    )
}

/// The fields of an expression, seconds first when written.
fn fields(expr: &str) -> Vec<(Field, &str)> {
    let parts: Vec<&str> = expr.split_whitespace().collect();
    let names: &[Field] = if parts.len() == 6 {
        &[
            Field::Second,
            Field::Minute,
            Field::Hour,
            Field::Dom,
            Field::Month,
            Field::Dow,
        ]
    } else {
        &[
            Field::Minute,
            Field::Hour,
            Field::Dom,
            Field::Month,
            Field::Dow,
        ]
    };
    names.iter().copied().zip(parts).collect()
}

/// A written value as croniter reads it: names resolved, weekday 7 as 0.
fn croniter_number(field: Field, text: &str) -> Option<u32> {
    let upper = text.to_ascii_uppercase();
    let n = match field {
        Field::Month => MONTHS
            .iter()
            .position(|m| *m == upper)
            .map(|i| i as u32 + 1),
        Field::Dow => DAYS.iter().position(|d| *d == upper).map(|i| i as u32),
        _ => None,
    };
    let n = n.or_else(|| text.parse().ok())?;
    Some(if field == Field::Dow && n == 7 { 0 } else { n })
}

/// A value as kairos reads it: a number, or a name (`SUN` is 0).
fn kairos_number(field: Field, text: &str) -> Option<u32> {
    let upper = text.to_ascii_uppercase();
    match field {
        Field::Month => MONTHS
            .iter()
            .position(|m| *m == upper)
            .map(|i| i as u32 + 1),
        Field::Dow => DAYS.iter().position(|d| *d == upper).map(|i| i as u32),
        _ => None,
    }
    .or_else(|| text.parse().ok())
}

/// A range's ends as kairos reads them: names resolved, `SUN` ending a range after
/// another day as 7.
fn kairos_range(field: Field, a: &str, b: &str) -> Option<(u32, u32)> {
    let start = kairos_number(field, a)?;
    let end = match kairos_number(field, b)? {
        0 if field == Field::Dow && start != 0 && b.eq_ignore_ascii_case("SUN") => 7,
        end => end,
    };
    Some((start, end))
}

/// The expression croniter evaluates when it widens each range with equal ends to its
/// whole field (`5-5` is every minute to croniter); `None` when there is no such range.
fn croniter_equal_ranges(expr: &str) -> Option<String> {
    let mut changed = false;
    let rewritten: Vec<String> = fields(expr)
        .into_iter()
        .map(|(field, text)| {
            text.split(',')
                .map(|item| {
                    let (base, step) = match item.split_once('/') {
                        Some((base, step)) => (base, Some(step)),
                        None => (item, None),
                    };
                    let equal = base.split_once('-').is_some_and(|(a, b)| {
                        croniter_number(field, a).is_some()
                            && croniter_number(field, a) == croniter_number(field, b)
                    });
                    if !equal {
                        return item.to_string();
                    }
                    changed = true;
                    let (lo, hi) = field.croniter_span();
                    match step {
                        Some(step) => format!("{lo}-{hi}/{step}"),
                        None => format!("{lo}-{hi}"),
                    }
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    changed.then(|| rewritten.join(" "))
}

/// The values a field names as kairos reads it, a weekday 7 counted as Sunday (0); `None`
/// for a field with `L`, `W`, `#` or `?`.
fn values(field: Field, text: &str) -> Option<BTreeSet<u32>> {
    let (lo, hi) = match field {
        Field::Dow => (0, 7),
        other => other.bounds(),
    };
    let mut set = BTreeSet::new();
    for item in text.split(',') {
        let (base, step) = match item.split_once('/') {
            Some((base, step)) => (base, step.parse().ok()?),
            None => (item, 1),
        };
        let (a, b) = match base.split_once('-') {
            _ if base == "*" => (lo, hi),
            Some((a, b)) => kairos_range(field, a, b)?,
            None => {
                let n = kairos_number(field, base)?;
                (n, n)
            }
        };
        set.extend(
            (a..=b)
                .step_by(step)
                .map(|v| if field == Field::Dow && v == 7 { 0 } else { v }),
        );
    }
    Some(set)
}

/// The expression croniter evaluates when a day field lists every day: croniter reads it
/// as `*` (so the other day field alone decides) when the other day field's text holds a
/// `*`; kairos keeps it a restriction and ORs the two. `None` when that does not apply.
fn croniter_full_day_fields(expr: &str) -> Option<String> {
    let parts = fields(expr);
    let text = |f: Field| parts.iter().find(|(g, _)| *g == f).map_or("*", |(_, t)| *t);
    let (dom, dow) = (text(Field::Dom), text(Field::Dow));
    let full = |f: Field, t: &str, days: usize| values(f, t).is_some_and(|v| v.len() == days);
    let new_dom = if full(Field::Dom, dom, 31) && dow.contains('*') {
        "*"
    } else {
        dom
    };
    let new_dow = if full(Field::Dow, dow, 7) && dom.contains('*') {
        "*"
    } else {
        dow
    };
    if (new_dom, new_dow) == (dom, dow) {
        return None;
    }
    let rewritten: Vec<&str> = parts
        .iter()
        .map(|(f, t)| match f {
            Field::Dom => new_dom,
            Field::Dow => new_dow,
            _ => *t,
        })
        .collect();
    Some(rewritten.join(" "))
}

/// croniter's DST policy for an expression: it skips a missing wall time when the hour
/// field covers every hour and otherwise moves it to the jump; it fires at both
/// occurrences of a repeated one.
fn croniter_dst(expr: &str) -> (DstGap, DstFold) {
    let hour = fields(expr)
        .into_iter()
        .find(|(f, _)| *f == Field::Hour)
        .map_or("*", |(_, text)| text);
    let gap = if values(Field::Hour, hour).is_some_and(|h| h.len() == 24) {
        DstGap::Skip
    } else {
        DstGap::Shift
    };
    (gap, DstFold::Both)
}

/// `t` is the second occurrence of a wall time that happens twice in `zone`.
fn second_occurrence(zone: Tz, t: DateTime<Utc>) -> bool {
    let wall = t.with_timezone(&zone).naive_local();
    matches!(zone.from_local_datetime(&wall), LocalResult::Ambiguous(_, later) if later.with_timezone(&Utc) == t)
}

/// `t` is the second occurrence of a wall time repeated by clocks going back less than an
/// hour (Lord Howe's 30 minutes).
fn second_occurrence_in_short_fold(zone: Tz, t: DateTime<Utc>) -> bool {
    let wall = t.with_timezone(&zone).naive_local();
    match zone.from_local_datetime(&wall) {
        LocalResult::Ambiguous(first, later) if later.with_timezone(&Utc) == t => {
            let back =
                first.offset().fix().local_minus_utc() - later.offset().fix().local_minus_utc();
            0 < back && back < 3_600
        }
        _ => false,
    }
}

/// `t` is an instant at which `zone`'s clocks jumped forward.
fn jump(zone: Tz, t: DateTime<Utc>) -> bool {
    let offset = |t: DateTime<Utc>| {
        zone.offset_from_utc_datetime(&t.naive_utc())
            .fix()
            .local_minus_utc()
    };
    offset(t) > offset(t - Duration::seconds(1))
}

/// Which refusal rule explains kairos refusing an expression croniter accepts.
fn refusal(expr: &str, err: &SpecError) -> Option<Rule> {
    let fields = fields(expr);
    let text = |f: Field| {
        fields
            .iter()
            .find(|(g, _)| *g == f)
            .map_or("*", |(_, t)| *t)
    };
    match err {
        SpecError::DayFields { .. } => {
            let starred = |t: &str| t.starts_with('*') && t != "*";
            let restricted = |t: &str| !matches!(t, "*" | "?");
            let (dom, dow) = (text(Field::Dom), text(Field::Dow));
            ((starred(dom) && restricted(dow)) || (starred(dow) && restricted(dom)))
                .then_some(Rule::StarDayField)
        }
        SpecError::Field { rule, value, field } => {
            let field = match field {
                kairos_core::CronField::Second => Field::Second,
                kairos_core::CronField::Minute => Field::Minute,
                kairos_core::CronField::Hour => Field::Hour,
                kairos_core::CronField::DayOfMonth => Field::Dom,
                kairos_core::CronField::Month => Field::Month,
                kairos_core::CronField::DayOfWeek => Field::Dow,
                _ => return None,
            };
            let short_step = value.split(',').any(|item| {
                item.split_once('/')
                    .is_some_and(|(base, _)| base != "*" && !base.contains('-'))
            });
            let backward = value.split(',').any(|item| {
                let base = item.split('/').next().unwrap_or(item);
                base.split_once('-')
                    .and_then(|(a, b)| kairos_range(field, a, b))
                    .is_some_and(|(a, b)| a > b)
            });
            if rule.contains("cron implementations disagree on where it ends") && short_step {
                Some(Rule::ShortStep)
            } else if rule.contains("runs backwards") && backward {
                Some(Rule::BackwardRange)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// What a case came to.
enum Outcome {
    Identical,
    BothRefuse,
    Deliberate(BTreeSet<Rule>),
    Unexplained(String),
}

fn show(series: &[DateTime<Utc>], zone: Tz) -> String {
    series
        .iter()
        .map(|t| {
            format!(
                "{} ({})",
                t.to_rfc3339_opts(SecondsFormat::Secs, true),
                t.with_timezone(&zone).format("%Y-%m-%d %H:%M:%S %:z")
            )
        })
        .collect::<Vec<_>>()
        .join("\n      ")
}

/// croniter's reading of an expression's text, as a kairos expression; `None` when it
/// reads the text as kairos does.
type Reading = fn(&str) -> Option<String>;

/// Explains a difference between two accepted series, or says why it cannot.
///
/// Equal ranges are first read as croniter reads them. What still differs must be DST, and
/// each differing instant is attributed to one rule: it has to sit on a transition of the
/// zone (a jump, or the second occurrence of a repeated wall time), and it has to be a tick
/// kairos itself gives under croniter's DST policy (so the calendar does match there).
fn explain(
    case: &Case,
    zone: Tz,
    ours: &Series,
    theirs: &Series,
) -> Result<BTreeSet<Rule>, String> {
    let mut rules = BTreeSet::new();
    // Read the text as croniter does, one rule at a time; a rule counts when it changes
    // the times.
    let readings: [(Rule, Reading); 2] = [
        (Rule::EqualRange, croniter_equal_ranges),
        (Rule::FullDayField, croniter_full_day_fields),
    ];
    let mut expr = case.expr.kairos.clone();
    let mut plain = ours.clone();
    for (rule, reading) in readings {
        if let Some(read) = reading(&expr) {
            let series = kairos(&read, zone, case.start, None)
                .map_err(|e| format!("croniter's reading {read:?} is refused: {e}"))?;
            if !same(&series, &plain) {
                rules.insert(rule);
            }
            expr = read;
            plain = series;
        }
    }
    let like: BTreeSet<_> = kairos(&expr, zone, case.start, Some(croniter_dst(&expr)))
        .map_err(|e| e.to_string())?
        .into_iter()
        .collect();
    let kind = Spec::parse(&expr).ok().and_then(|s| s.job_kind());
    let wildcard = kind == Some(JobKind::Wildcard);
    let fixed = kind == Some(JobKind::FixedTime);
    let seconds_first = fields(&expr).len() == 6;
    // croniter moves a missing wall time forward a minute at a time, keeping its seconds:
    // it fires within the minute after the jump, where kairos fires at the jump itself.
    let kept_seconds = |jump_at: DateTime<Utc>, t: DateTime<Utc>| {
        seconds_first && jump_at < t && t < jump_at + Duration::minutes(1)
    };
    let (only_ours, only_theirs) = differing(&plain, theirs);
    for t in only_ours {
        let rule = if jump(zone, t) && fixed && !like.contains(&t) {
            Rule::GapByJobKind
        } else if jump(zone, t) && like.contains(&t) && theirs.iter().any(|c| kept_seconds(t, *c)) {
            Rule::GapSecondsKept
        } else if second_occurrence_in_short_fold(zone, t) && wildcard {
            Rule::WildcardFold
        } else {
            return Err(format!(
                "kairos fires at {t}; croniter does not, and no rule says why"
            ));
        };
        rules.insert(rule);
    }
    for t in only_theirs {
        let rule = if second_occurrence(zone, t) && fixed && like.contains(&t) {
            Rule::FixedTimeFold
        } else if jump(zone, t) && wildcard && like.contains(&t) {
            Rule::GapByJobKind
        } else if like.iter().any(|j| jump(zone, *j) && kept_seconds(*j, t)) {
            Rule::GapSecondsKept
        } else {
            return Err(format!(
                "croniter fires at {t}; kairos does not, and no rule says why"
            ));
        };
        rules.insert(rule);
    }
    Ok(rules)
}

fn outcome(
    case: &Case,
    ours: &Result<Series, SpecError>,
    theirs: &Result<Series, String>,
) -> Outcome {
    let zone = parse_zone(case.zone).expect("zone");
    let report = |why: &str| {
        let side = |r: Result<String, String>| match r {
            Ok(s) => format!("\n      {s}"),
            Err(e) => format!(" refused: {e}"),
        };
        Outcome::Unexplained(format!(
            "{:?} (croniter: {:?}) in {} after {}: {why}\n    kairos:{}\n    croniter:{}",
            case.expr.kairos,
            case.expr.croniter,
            case.zone,
            case.start.to_rfc3339_opts(SecondsFormat::Secs, true),
            side(
                ours.as_ref()
                    .map(|s| show(s, zone))
                    .map_err(|e| e.to_string())
            ),
            side(theirs.as_ref().map(|s| show(s, zone)).map_err(Clone::clone)),
        ))
    };
    match (ours, theirs) {
        (Ok(ours), Ok(theirs)) if same(ours, theirs) => Outcome::Identical,
        (Ok(ours), Ok(theirs)) => match explain(case, zone, ours, theirs) {
            Ok(rules) if !rules.is_empty() => Outcome::Deliberate(rules),
            Ok(_) => report("the series differ and no rule explains it"),
            Err(why) => report(&why),
        },
        (Err(_), Err(_)) => Outcome::BothRefuse,
        (Err(err), Ok(_)) => match refusal(&case.expr.kairos, err) {
            Some(rule) => Outcome::Deliberate(BTreeSet::from([rule])),
            None => report("kairos refuses an expression croniter accepts"),
        },
        (Ok(_), Err(_)) => report("croniter refuses an expression kairos accepts"),
    }
}

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
    let docs = include_str!("../../../docs/time.md");
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
