//! [`Error`]: why a registrar call changed nothing, with field-level [`Problem`]s for bad
//! input so that the HTTP layer can name every offending field at once.

pub use kairos_core::Problem;

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

impl Error {
    /// One problem with one field.
    pub fn invalid(field: impl Into<String>, rule: impl Into<String>) -> Error {
        Error::Invalid(vec![Problem::new(field, rule)])
    }
}

/// Result of registrar calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;
