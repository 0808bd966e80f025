//! The one rule for ids (schedule, workflow, user, request ids).
//!
//! Ids appear in NATS subjects (`kairos.launch.<workflow_id>`) and in run keys, so they are
//! limited to characters that are safe in both: ASCII letters, digits, `_` and `-`.
//! Because `:` is excluded, `schedule_id:...` key inputs can never collide across key spaces.

/// Longest id accepted.
pub const MAX_ID_LEN: usize = 200;

/// Why an id was rejected; names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdError {
    /// Empty string.
    #[error("{field} must not be empty")]
    Empty {
        /// The field name (`schedule_id`).
        field: &'static str,
    },
    /// Longer than [`MAX_ID_LEN`].
    #[error("{field} is {len} characters long; the limit is 200")]
    TooLong {
        /// The field name.
        field: &'static str,
        /// Its length in characters.
        len: usize,
    },
    /// A character outside `[A-Za-z0-9_-]`.
    #[error("{field} contains {found:?}; ids may use only ASCII letters, digits, '_' and '-'")]
    Charset {
        /// The field name.
        field: &'static str,
        /// The first offending character.
        found: char,
    },
}

/// Checks an id against the charset and length rule.
///
/// # Errors
/// [`IdError`] naming `field` and the rule broken.
pub fn validate_id(field: &'static str, value: &str) -> Result<(), IdError> {
    if value.is_empty() {
        return Err(IdError::Empty { field });
    }
    let len = value.chars().count();
    if len > MAX_ID_LEN {
        return Err(IdError::TooLong { field, len });
    }
    match value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        Some(found) => Err(IdError::Charset { field, found }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_one_rule() {
        assert_eq!(validate_id("schedule_id", "nightly_etl-2"), Ok(()));
        assert_eq!(
            validate_id("schedule_id", ""),
            Err(IdError::Empty {
                field: "schedule_id"
            })
        );
        assert_eq!(
            validate_id("workflow_id", "a.b"),
            Err(IdError::Charset {
                field: "workflow_id",
                found: '.'
            })
        );
        assert!(matches!(
            validate_id("user_id", "a:b"),
            Err(IdError::Charset { found: ':', .. })
        ));
        assert_eq!(validate_id("user_id", &"x".repeat(200)), Ok(()));
        assert_eq!(
            validate_id("user_id", &"x".repeat(201)),
            Err(IdError::TooLong {
                field: "user_id",
                len: 201
            })
        );
    }
}
