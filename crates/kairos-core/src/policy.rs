//! Schedule policies by name, as stored and as sent over the API.

use std::fmt;
use std::str::FromStr;

/// An unknown policy name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {value:?} is not one of: {allowed}")]
pub struct PolicyError {
    /// `overlap_policy` or `catchup_policy`.
    pub field: &'static str,
    /// The value given.
    pub value: String,
    /// The accepted names.
    pub allowed: &'static str,
}

/// What happens when a tick is due while an earlier run of the schedule is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OverlapPolicy {
    /// Fire anyway: runs may overlap.
    Allow,
    /// Record the tick as `SKIPPED`.
    #[default]
    Skip,
    /// Hold the tick as `QUEUED` until the in-flight run ends.
    Queue,
}

/// What happens to ticks missed by more than the misfire grace (downtime).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CatchupPolicy {
    /// Do not fire them (counted, not stored).
    #[default]
    None,
    /// Fire them now, oldest first, bounded per pass.
    FireImmediately,
    /// Fire them spread evenly across the lookahead window.
    Spread,
}

macro_rules! named_policy {
    ($ty:ident, $field:literal, $allowed:literal, { $($variant:ident => $name:literal),+ }) => {
        impl $ty {
            /// The policy's name as stored and sent.
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $name),+ }
            }
        }

        impl FromStr for $ty {
            type Err = PolicyError;

            fn from_str(value: &str) -> Result<Self, PolicyError> {
                match value {
                    $($name => Ok($ty::$variant),)+
                    _ => Err(PolicyError { field: $field, value: value.to_string(), allowed: $allowed }),
                }
            }
        }

        impl TryFrom<String> for $ty {
            type Error = PolicyError;

            fn try_from(value: String) -> Result<Self, PolicyError> {
                value.parse()
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

named_policy!(OverlapPolicy, "overlap_policy", "allow, skip, queue", {
    Allow => "allow", Skip => "skip", Queue => "queue"
});
named_policy!(CatchupPolicy, "catchup_policy", "none, fire_immediately, spread", {
    None => "none", FireImmediately => "fire_immediately", Spread => "spread"
});
