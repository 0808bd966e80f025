//! The checks and refusals every registrar operation shares: ids, page limits, the
//! not-found and conflict errors, and the reasons written on runs a pause or delete cancels.

use crate::apply::PlanError;
use crate::error::{Error, Result};

/// Reason written on runs cancelled by a pause.
pub(crate) const PAUSED: &str = "paused";
/// Reason written on runs cancelled by a delete.
pub(crate) const DELETED: &str = "schedule deleted";
/// Largest page of [`crate::Registrar::list`] and [`crate::Registrar::runs`].
pub const LIST_LIMIT_MAX: i64 = 1000;
/// Longest pause note, in characters.
pub const MAX_PAUSE_NOTE_CHARS: usize = 1000;

pub(crate) fn plan_error(err: PlanError, schedule_id: &str) -> Error {
    match err {
        PlanError::Field(problem) => Error::Invalid(vec![problem]),
        PlanError::Revision(0) => Error::Conflict {
            detail: format!(
                "schedule {schedule_id:?} does not exist, so it has no revision to match"
            ),
        },
        PlanError::Revision(stored) => Error::Conflict {
            detail: format!(
                "schedule {schedule_id:?} is at revision {stored}, not the revision given"
            ),
        },
    }
}

pub(crate) fn check_id(schedule_id: &str) -> Result<()> {
    kairos_core::validate_id("schedule_id", schedule_id)
        .map_err(|err| Error::invalid("schedule_id", err.to_string()))
}

/// Checks the ids a listing is filtered by, each named by its field, as `GET /schedules`
/// checks ids: a NUL or any other character no id has is a refusal naming the parameter,
/// never a failed query.
pub(crate) fn check_filter_ids(ids: [(&'static str, &Option<String>); 2]) -> Result<()> {
    for (field, value) in ids {
        if let Some(value) = value {
            kairos_core::validate_id(field, value)
                .map_err(|e| Error::invalid(field, e.to_string()))?;
        }
    }
    Ok(())
}

pub(crate) fn check_limit(limit: i64) -> Result<()> {
    if (1..=LIST_LIMIT_MAX).contains(&limit) {
        Ok(())
    } else {
        Err(Error::invalid(
            "limit",
            format!("{limit} is out of range: must be between 1 and {LIST_LIMIT_MAX}"),
        ))
    }
}

pub(crate) fn not_found(schedule_id: &str) -> Error {
    Error::NotFound {
        what: format!("schedule {schedule_id:?}"),
    }
}

pub(crate) fn concurrent(schedule_id: &str) -> Error {
    Error::Conflict {
        detail: format!(
            "schedule {schedule_id:?} was changed by a concurrent request; read it and retry"
        ),
    }
}

/// Search text: at most [`kairos_core::MAX_ID_LEN`] characters (no id is longer, so no
/// longer text can match) and no control character.
pub(crate) fn check_search(field: &str, text: &str) -> Result<()> {
    let len = text.chars().count();
    if len > kairos_core::MAX_ID_LEN {
        return Err(Error::invalid(
            field,
            format!(
                "is {len} characters long; the limit is {}",
                kairos_core::MAX_ID_LEN
            ),
        ));
    }
    if text.chars().any(char::is_control) {
        return Err(Error::invalid(field, "must not contain control characters"));
    }
    Ok(())
}
