//! Comparison of the two series and the recognition of each deliberate rule.

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, LocalResult, Offset, SecondsFormat, TimeZone, Utc};
use chrono_tz::Tz;
use kairos_core::{parse_zone, DstFold, DstGap, JobKind, Spec, SpecError};

use super::*;

// ---------------------------------------------------------------------------------------
// Comparison and classification.

/// Whether two series agree on every instant both cover: each may stop early (20 times
/// reach further in one than in the other when they differ), so the comparison ends at
/// the earlier of the two last times; a series shorter than 20 has ended and covers all.
pub(crate) fn same(a: &[DateTime<Utc>], b: &[DateTime<Utc>]) -> bool {
    let (only_a, only_b) = differing(a, b);
    only_a.is_empty() && only_b.is_empty()
}

/// The instants, within what both cover, that only `a` has and that only `b` has.
pub(crate) fn differing(
    a: &[DateTime<Utc>],
    b: &[DateTime<Utc>],
) -> (Vec<DateTime<Utc>>, Vec<DateTime<Utc>>) {
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
pub(crate) fn fields(expr: &str) -> Vec<(Field, &str)> {
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
pub(crate) fn croniter_number(field: Field, text: &str) -> Option<u32> {
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
pub(crate) fn kairos_number(field: Field, text: &str) -> Option<u32> {
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
pub(crate) fn kairos_range(field: Field, a: &str, b: &str) -> Option<(u32, u32)> {
    let start = kairos_number(field, a)?;
    let end = match kairos_number(field, b)? {
        0 if field == Field::Dow && start != 0 && b.eq_ignore_ascii_case("SUN") => 7,
        end => end,
    };
    Some((start, end))
}

/// The expression croniter evaluates when it widens each range with equal ends to its
/// whole field (`5-5` is every minute to croniter); `None` when there is no such range.
pub(crate) fn croniter_equal_ranges(expr: &str) -> Option<String> {
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
pub(crate) fn values(field: Field, text: &str) -> Option<BTreeSet<u32>> {
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
pub(crate) fn croniter_full_day_fields(expr: &str) -> Option<String> {
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
pub(crate) fn croniter_dst(expr: &str) -> (DstGap, DstFold) {
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
pub(crate) fn second_occurrence(zone: Tz, t: DateTime<Utc>) -> bool {
    let wall = t.with_timezone(&zone).naive_local();
    matches!(zone.from_local_datetime(&wall), LocalResult::Ambiguous(_, later) if later.with_timezone(&Utc) == t)
}

/// `t` is the second occurrence of a wall time repeated by clocks going back less than an
/// hour (Lord Howe's 30 minutes).
pub(crate) fn second_occurrence_in_short_fold(zone: Tz, t: DateTime<Utc>) -> bool {
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
pub(crate) fn jump(zone: Tz, t: DateTime<Utc>) -> bool {
    let offset = |t: DateTime<Utc>| {
        zone.offset_from_utc_datetime(&t.naive_utc())
            .fix()
            .local_minus_utc()
    };
    offset(t) > offset(t - Duration::seconds(1))
}

/// Which refusal rule explains kairos refusing an expression croniter accepts.
pub(crate) fn refusal(expr: &str, err: &SpecError) -> Option<Rule> {
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
pub(crate) enum Outcome {
    Identical,
    BothRefuse,
    Deliberate(BTreeSet<Rule>),
    Unexplained(String),
}

pub(crate) fn show(series: &[DateTime<Utc>], zone: Tz) -> String {
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
pub(crate) type Reading = fn(&str) -> Option<String>;

/// Explains a difference between two accepted series, or says why it cannot.
///
/// Equal ranges are first read as croniter reads them. What still differs must be DST, and
/// each differing instant is attributed to one rule: it has to sit on a transition of the
/// zone (a jump, or the second occurrence of a repeated wall time), and it has to be a tick
/// kairos itself gives under croniter's DST policy (so the calendar does match there).
pub(crate) fn explain(
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

pub(crate) fn outcome(
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
