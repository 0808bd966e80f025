//! Enums named by text (statuses, sources, policies): one name mapping per enum, written
//! once with [`named_enum!`], and one error for a text that names no variant.

/// A text that names no variant of a named enum.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {value:?} is not one of: {allowed}")]
pub struct UnknownName {
    /// What was being named (`status`, `source`, `overlap_policy`, `roll`, ...).
    pub field: &'static str,
    /// The text given.
    pub value: String,
    /// The accepted names.
    pub allowed: &'static str,
}

/// Gives an enum its names: `as_str`, `FromStr`, `TryFrom<String>` (the store decodes
/// columns with it) and `Display`, from one table of variant => name.
macro_rules! named_enum {
    ($ty:ident, $field:literal, $allowed:literal, { $($variant:ident => $name:literal),+ }) => {
        impl $ty {
            /// The name as stored and sent.
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $name),+ }
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::UnknownName;

            fn from_str(value: &str) -> Result<Self, $crate::UnknownName> {
                match value {
                    $($name => Ok($ty::$variant),)+
                    _ => Err($crate::UnknownName {
                        field: $field,
                        value: value.to_string(),
                        allowed: $allowed,
                    }),
                }
            }
        }

        impl TryFrom<String> for $ty {
            type Error = $crate::UnknownName;

            fn try_from(value: String) -> Result<Self, $crate::UnknownName> {
                value.parse()
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use named_enum;
