//! A cron expression as the parser read it: each field's list of items, names turned into
//! numbers. The calendar matcher is built from it ([`CronExpr::numeric`]) and readers of a
//! parsed [`Spec`](super::Spec) (the operator page's sentence) see the same items, so the
//! two cannot read the text differently.

use super::CronField;

/// One item of a cron field's comma-separated list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CronItem {
    /// `*`, or `?` in a day field: every value of the field.
    Any,
    /// One value (`MON` is 1, `JAN` is 1).
    Value(u32),
    /// `a-b`, both ends included (`FRI-SUN` is 5 to 7).
    Range(u32, u32),
    /// `*/n` (no range: the field's whole span) or `a-b/n`: every n-th value from the start.
    Step(Option<(u32, u32)>, u32),
    /// `L` in day-of-month: the month's last day.
    LastDay,
    /// `LW` in day-of-month: the month's last weekday (Monday to Friday).
    LastWeekday,
    /// `nW` in day-of-month: the weekday nearest day `n`.
    NearestWeekday(u32),
    /// `dL` or `d#L` in day-of-week: the month's last weekday `d`.
    LastOf(u32),
    /// `d#n` in day-of-week: the month's n-th weekday `d` (n is 1 to 5).
    Nth(u32, u32),
}

impl CronItem {
    /// The item in the numeric syntax the calendar matcher parses.
    fn numeric(self) -> String {
        match self {
            CronItem::Any => "*".to_string(),
            CronItem::Value(v) => v.to_string(),
            CronItem::Range(a, b) => format!("{a}-{b}"),
            CronItem::Step(None, n) => format!("*/{n}"),
            CronItem::Step(Some((a, b)), n) => format!("{a}-{b}/{n}"),
            CronItem::LastDay => "L".to_string(),
            CronItem::LastWeekday => "LW".to_string(),
            CronItem::NearestWeekday(day) => format!("{day}W"),
            CronItem::LastOf(day) => format!("{day}#L"),
            CronItem::Nth(day, n) => format!("{day}#{n}"),
        }
    }
}

/// The fields in the order of a 7-field expression.
const FIELDS: [CronField; 7] = [
    CronField::Second,
    CronField::Minute,
    CronField::Hour,
    CronField::DayOfMonth,
    CronField::Month,
    CronField::DayOfWeek,
    CronField::Year,
];

/// A cron expression that passed the syntax rules, as its items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronExpr {
    /// Each field's items, in the order of [`FIELDS`].
    fields: [Vec<CronItem>; 7],
    both_days: bool,
}

impl CronExpr {
    /// An expression from its 7 fields' items (a 5-field expression's seconds as `0`, a
    /// missing year as `*`) and whether `+` came before day-of-week.
    pub(crate) fn new(fields: [Vec<CronItem>; 7], both_days: bool) -> CronExpr {
        CronExpr { fields, both_days }
    }

    /// The items of `field`, in the order written. A 5-field expression's seconds read as
    /// `0` and a missing year as `*`, which is how they match.
    pub fn field(&self, field: CronField) -> &[CronItem] {
        let index = FIELDS.iter().position(|f| *f == field).unwrap_or(0);
        &self.fields[index]
    }

    /// Whether `+` came before day-of-week: a day must then match both day fields; without
    /// it, a day matching either restricted day field is enough (as in cron).
    pub fn both_days(&self) -> bool {
        self.both_days
    }

    /// `sec min hour dom mon dow year` in numbers, `+` kept: what the calendar matcher
    /// parses unambiguously.
    pub(crate) fn numeric(&self) -> String {
        let fields: Vec<String> = FIELDS
            .iter()
            .zip(&self.fields)
            .map(|(field, items)| {
                let list: Vec<String> = items.iter().map(|item| item.numeric()).collect();
                let and = if *field == CronField::DayOfWeek && self.both_days {
                    "+"
                } else {
                    ""
                };
                format!("{and}{}", list.join(","))
            })
            .collect();
        fields.join(" ")
    }
}

/// The English name of weekday `day` as cron numbers it (0 and 7 are Sunday); `None` above 7.
pub fn weekday_name(day: u32) -> Option<&'static str> {
    const NAMES: [&str; 7] = [
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
    ];
    (day <= 7).then(|| NAMES[day as usize % 7])
}
