//! `@after <schedule_id> [on success|failure|always]`: a chained trigger. Not a timetable:
//! it never produces ticks (its `Timetable` is always exhausted); a run of the child is
//! created when a run of the parent reaches the outcome (see `migrations/…_control.sql`).

use std::fmt;

use super::SpecError;
use crate::validate_id;

/// The parent's outcome a chained schedule waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChainOn {
    /// The parent's run ended `SUCCESS`.
    Success,
    /// The parent's run failed for good: `FAILED` or `TIMED_OUT` with no attempt left
    /// (dead-lettered). A failure that will be retried does not count.
    Failure,
    /// Success, final failure, or `CANCELLED` after the run was launched.
    Always,
}

impl ChainOn {
    /// The name as written after `on` (and as stored).
    pub fn as_str(self) -> &'static str {
        match self {
            ChainOn::Success => "success",
            ChainOn::Failure => "failure",
            ChainOn::Always => "always",
        }
    }
}

impl fmt::Display for ChainOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parsed `@after` spec: the parent schedule and the outcome waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// The parent schedule's id.
    pub parent: String,
    /// Which outcome of the parent's runs fires the child.
    pub on: ChainOn,
}

/// Reads the words after `@after`.
pub(super) fn parse(rest: &str) -> Result<Chain, SpecError> {
    let words: Vec<&str> = rest.split_whitespace().collect();
    let after = |rule: &str| SpecError::After {
        value: rest.trim().to_string(),
        rule: rule.to_string(),
    };
    let (parent, on) = match words.as_slice() {
        [parent] => (*parent, ChainOn::Success),
        [parent, word, outcome] if word.eq_ignore_ascii_case("on") => {
            let on = match outcome.to_ascii_lowercase().as_str() {
                "success" => ChainOn::Success,
                "failure" => ChainOn::Failure,
                "always" => ChainOn::Always,
                _ => {
                    return Err(after(
                        "the outcome after `on` must be success, failure or always",
                    ))
                }
            };
            (*parent, on)
        }
        [] => return Err(after("name the parent schedule: @after <schedule_id>")),
        _ => {
            return Err(after(
                "write @after <schedule_id> optionally followed by on success|failure|always",
            ))
        }
    };
    validate_id("schedule_id", parent).map_err(|err| after(&err.to_string()))?;
    Ok(Chain {
        parent: parent.to_string(),
        on,
    })
}
