//! The deliberate differences between kairos and croniter (docs/time.md, "Compared with
//! croniter").

// ---------------------------------------------------------------------------------------
// The deliberate differences.

/// A difference between kairos and croniter that kairos makes on purpose. Each is listed,
/// with its example, in docs/time.md "Compared with croniter".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rule {
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
    pub(crate) const ALL: [Rule; 9] = [
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
    pub(crate) fn example(self) -> (&'static str, &'static str, &'static str) {
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
