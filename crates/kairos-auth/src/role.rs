//! The three caller roles and what each may do.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer};

use crate::Error;

/// What a caller may do (docs/design.md §6).
///
/// | role | may call |
/// |---|---|
/// | `deployer` | the registrar (`/schedules/*` writes) and `/workflows/*`, plus every `GET` |
/// | `executor` | `/runs/{key}/status` and `/run-launcher/start`, plus every `GET` |
/// | `reader` | `GET` only |
///
/// Which role a route requires is the API's decision; [`Role::allows`] encodes only the rule
/// that `reader` is the common floor: every role may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Registers workflows and schedules (the compiler).
    Deployer,
    /// Reports run status and starts runs (the DAG executor).
    Executor,
    /// Reads schedules, runs and workflows.
    Reader,
}

impl Role {
    /// The role's name as written in config and in the JWT `role` claim.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Deployer => "deployer",
            Role::Executor => "executor",
            Role::Reader => "reader",
        }
    }

    /// Whether a caller holding `self` may call a route that requires `required`:
    /// the same role always; any role when `required` is [`Role::Reader`].
    pub fn allows(self, required: Role) -> bool {
        self == required || required == Role::Reader
    }
}

impl FromStr for Role {
    type Err = Error;

    fn from_str(value: &str) -> Result<Self, Error> {
        match value {
            "deployer" => Ok(Role::Deployer),
            "executor" => Ok(Role::Executor),
            "reader" => Ok(Role::Reader),
            _ => Err(Error::UnknownRole {
                value: value.to_owned(),
            }),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = String::deserialize(deserializer)?;
        value.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Role; 3] = [Role::Deployer, Role::Executor, Role::Reader];

    #[test]
    fn names_round_trip() {
        for role in ALL {
            assert_eq!(role.as_str().parse::<Role>().expect("parse"), role);
        }
        assert!(matches!(
            "admin".parse::<Role>(),
            Err(Error::UnknownRole { .. })
        ));
        assert!(matches!(
            "Deployer".parse::<Role>(),
            Err(Error::UnknownRole { .. })
        ));
    }

    #[test]
    fn every_role_may_read_and_only_its_own_writes() {
        for role in ALL {
            assert!(role.allows(Role::Reader), "{role} reads");
            assert!(role.allows(role), "{role} does its own job");
        }
        assert!(!Role::Reader.allows(Role::Deployer));
        assert!(!Role::Reader.allows(Role::Executor));
        assert!(!Role::Executor.allows(Role::Deployer));
        assert!(!Role::Deployer.allows(Role::Executor));
    }
}
