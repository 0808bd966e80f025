//! [`Error`]: why a registrar call changed nothing, with field-level [`Problem`]s for bad
//! input so that the HTTP layer can name every offending field at once.

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

/// Why a registrar call failed. Every variant means nothing was changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input broke one or more rules (never empty).
    #[error("invalid input: {}", first_problem(.0))]
    Invalid(Vec<Problem>),
    /// The schedule or workflow version does not exist.
    #[error("{what} not found")]
    NotFound {
        /// `schedule "x"`, `workflow "w" version 3`.
        what: String,
    },
    /// A concurrent write or an immutable record got in the way.
    #[error("conflict: {detail}")]
    Conflict {
        /// What conflicted, for the caller.
        detail: String,
    },
    /// The database failed.
    #[error("store failed")]
    Store(#[from] kairos_store::Error),
}

fn first_problem(problems: &[Problem]) -> String {
    match problems {
        [] => "no detail".to_string(),
        [one] => one.to_string(),
        [first, rest @ ..] => format!("{first} (and {} more)", rest.len()),
    }
}

impl From<sqlx::Error> for Error {
    fn from(err: sqlx::Error) -> Error {
        Error::Store(kairos_store::Error::Database(err))
    }
}

impl Error {
    /// One problem with one field.
    pub fn invalid(field: impl Into<String>, rule: impl Into<String>) -> Error {
        Error::Invalid(vec![Problem::new(field, rule)])
    }
}

/// Result of registrar calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;
