//! IANA zone names → `chrono_tz::Tz`, with an error that says what was wrong.

use std::str::FromStr;

use chrono_tz::Tz;

/// Why a zone name was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("timezone {name:?} is not an IANA time zone name{hint}")]
pub struct ZoneError {
    /// The name as given.
    pub name: String,
    hint: String,
}

/// Parses an IANA zone name (`America/New_York`, `UTC`). Names are case-sensitive as in the
/// tz database; a name that only differs in case gets a "did you mean".
///
/// # Errors
/// [`ZoneError`] when the name is not in the tz database.
pub fn parse_zone(name: &str) -> Result<Tz, ZoneError> {
    Tz::from_str(name).map_err(|_| {
        let hint = match Tz::from_str_insensitive(name) {
            Ok(zone) => format!(" (did you mean {:?}?)", zone.name()),
            Err(_) => " (e.g. America/New_York, Europe/London, UTC)".to_string(),
        };
        ZoneError {
            name: name.to_string(),
            hint,
        }
    })
}
