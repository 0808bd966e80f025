//! The seeded generator of valid cron expressions.

// ---------------------------------------------------------------------------------------
// A tiny deterministic generator (SplitMix64): the same seed gives the same expressions on
// every machine, without a dependency.

pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub(crate) fn between(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next() % u64::from(hi - lo + 1)) as u32
    }

    pub(crate) fn percent(&mut self, p: u32) -> bool {
        self.between(0, 99) < p
    }

    pub(crate) fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.between(0, items.len() as u32 - 1) as usize]
    }

    /// An index drawn with the given weights.
    pub(crate) fn weighted(&mut self, weights: &[u32]) -> usize {
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
pub(crate) enum Field {
    Second,
    Minute,
    Hour,
    Dom,
    Month,
    Dow,
}

impl Field {
    /// The values the generator draws (`7` is drawn for Sunday only as a range end).
    pub(crate) fn bounds(self) -> (u32, u32) {
        match self {
            Field::Second | Field::Minute => (0, 59),
            Field::Hour => (0, 23),
            Field::Dom => (1, 31),
            Field::Month => (1, 12),
            Field::Dow => (0, 6),
        }
    }

    /// The field as croniter spans it (a range with equal ends widens to this).
    pub(crate) fn croniter_span(self) -> (u32, u32) {
        self.bounds()
    }
}

pub(crate) const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
pub(crate) const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// A name in upper, lower, title or random case.
pub(crate) fn any_case(rng: &mut Rng, name: &str) -> String {
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
pub(crate) fn written(rng: &mut Rng, field: Field, n: u32) -> String {
    match field {
        Field::Month if rng.percent(50) => any_case(rng, MONTHS[n as usize - 1]),
        Field::Dow if n == 7 && rng.percent(50) => any_case(rng, "SUN"),
        Field::Dow if n < 7 && rng.percent(50) => any_case(rng, DAYS[n as usize]),
        _ => n.to_string(),
    }
}

/// A value, with the hours and minutes around DST transitions drawn more often.
pub(crate) fn value(rng: &mut Rng, field: Field) -> u32 {
    let (lo, hi) = field.bounds();
    match field {
        Field::Hour if rng.percent(50) => rng.between(0, 4),
        Field::Minute | Field::Second if rng.percent(30) => rng.pick(&[0, 15, 30, 45]),
        _ => rng.between(lo, hi),
    }
}

/// One list item of a field: a value, a range (mostly low to high; sometimes with equal
/// ends, sometimes backwards, which kairos refuses), or a stepped range.
pub(crate) fn item(rng: &mut Rng, field: Field) -> String {
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
pub(crate) fn star_step(rng: &mut Rng, field: Field) -> String {
    let (lo, hi) = field.bounds();
    format!("*/{}", rng.between(2, (hi - lo).div_ceil(2).min(12)))
}

/// A whole field: `*` with the given weight, else a list of 1 to 4 items.
pub(crate) fn field_text(rng: &mut Rng, field: Field, star_percent: u32) -> String {
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
pub(crate) struct Expr {
    pub(crate) kairos: String,
    pub(crate) croniter: String,
    pub(crate) seconds_first: bool,
}

/// The day fields. croniter cannot combine `#`/`L` in day-of-week or `W` in day-of-month
/// with a restricted other day field (it drops the other field, or finds no date), so those
/// forms come only beside `*` or `?`; that is a limit of the comparison, not a rule.
pub(crate) fn day_fields(rng: &mut Rng) -> (String, String, String) {
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

pub(crate) fn expression(rng: &mut Rng) -> Expr {
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
