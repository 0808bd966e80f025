//! [`Problem`]: one rejected field of a caller's input, naming the field and the rule, so
//! that every boundary (HTTP body, NATS message, registrar input) reports bad input the
//! same way.

use std::fmt;

/// One rejected field: which field (a JSON path such as `schedules[2].cron_expr`) and
/// the rule it broke, in one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The field, as the caller wrote it.
    pub field: String,
    /// The rule broken, naming the value where that helps.
    pub rule: String,
}

impl Problem {
    /// A problem with `field`.
    pub fn new(field: impl Into<String>, rule: impl Into<String>) -> Problem {
        Problem {
            field: field.into(),
            rule: rule.into(),
        }
    }

    /// The same problem with `prefix.` before the field (for nested bodies).
    pub fn within(self, prefix: &str) -> Problem {
        Problem {
            field: format!("{prefix}.{}", self.field),
            rule: self.rule,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.rule)
    }
}
