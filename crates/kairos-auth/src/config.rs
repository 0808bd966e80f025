//! The `[auth]` config section, as deserialized from `config/default.toml` and its layers.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Deserializer};

use crate::{Error, Role};

/// How callers authenticate (`auth.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AuthMode {
    /// No authentication; allowed only on a loopback bind address.
    #[default]
    None,
    /// Static bearer tokens from `[[auth.tokens]]`.
    Tokens,
    /// JWTs signed with HS256 or RS256.
    Jwt,
}

impl AuthMode {
    /// The mode's name as written in config.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMode::None => "none",
            AuthMode::Tokens => "tokens",
            AuthMode::Jwt => "jwt",
        }
    }
}

impl FromStr for AuthMode {
    type Err = Error;

    fn from_str(value: &str) -> Result<Self, Error> {
        match value {
            "none" => Ok(AuthMode::None),
            "tokens" => Ok(AuthMode::Tokens),
            "jwt" => Ok(AuthMode::Jwt),
            _ => Err(Error::UnknownMode {
                value: value.to_owned(),
            }),
        }
    }
}

impl fmt::Display for AuthMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for AuthMode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = String::deserialize(deserializer)?;
        value.parse().map_err(serde::de::Error::custom)
    }
}

/// One `[[auth.tokens]]` entry: a named static bearer token with a role.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticToken {
    /// Who holds the token; becomes [`crate::Principal::name`] and appears in logs.
    pub name: String,
    /// What the holder may do.
    pub role: Role,
    /// Lowercase or uppercase hex sha256 of the token (`printf %s "$TOKEN" | sha256sum`).
    /// The token itself is never stored.
    pub sha256: String,
}

/// The `[auth]` section of the config. Its `Debug` output hides the HS256 secret.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// `none`, `tokens` or `jwt`.
    #[serde(default)]
    pub mode: AuthMode,
    /// The audience a JWT's `aud` must contain; required for `jwt`.
    pub audience: Option<String>,
    /// The shared secret for HS256 JWTs (as UTF-8 bytes).
    pub jwt_hs256_secret: Option<String>,
    /// A PEM file (`BEGIN PUBLIC KEY` or `BEGIN RSA PUBLIC KEY`) for RS256 JWTs.
    pub jwt_rs256_public_key_pem_file: Option<PathBuf>,
    /// The static tokens, for `tokens`.
    #[serde(default)]
    pub tokens: Vec<StaticToken>,
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secret = self.jwt_hs256_secret.as_ref().map(|_| "<redacted>");
        f.debug_struct("AuthConfig")
            .field("mode", &self.mode)
            .field("audience", &self.audience)
            .field("jwt_hs256_secret", &secret)
            .field(
                "jwt_rs256_public_key_pem_file",
                &self.jwt_rs256_public_key_pem_file,
            )
            .field("tokens", &self.tokens)
            .finish()
    }
}

impl AuthConfig {
    /// Checks the section without touching the file system: each mode has what it needs,
    /// token hashes are 64 hex digits, names and hashes are not repeated.
    ///
    /// # Errors
    /// [`Error::MissingSetting`], [`Error::TokenHash`] or [`Error::DuplicateToken`],
    /// naming the key.
    pub fn validate(&self) -> Result<(), Error> {
        self.validate_tokens()?;
        match self.mode {
            AuthMode::None => Ok(()),
            AuthMode::Tokens if self.tokens.is_empty() => Err(Error::MissingSetting {
                key: "auth.tokens",
                mode: "tokens",
            }),
            AuthMode::Tokens => Ok(()),
            AuthMode::Jwt => self.validate_jwt(),
        }
    }

    fn validate_tokens(&self) -> Result<(), Error> {
        for (index, token) in self.tokens.iter().enumerate() {
            let hash_ok =
                token.sha256.len() == 64 && token.sha256.bytes().all(|b| b.is_ascii_hexdigit());
            if !hash_ok {
                return Err(Error::TokenHash { index });
            }
            let earlier = &self.tokens[..index];
            if earlier.iter().any(|other| other.name == token.name) {
                return Err(Error::DuplicateToken {
                    index,
                    what: "name",
                });
            }
            if earlier
                .iter()
                .any(|other| other.sha256.eq_ignore_ascii_case(&token.sha256))
            {
                return Err(Error::DuplicateToken {
                    index,
                    what: "sha256",
                });
            }
        }
        Ok(())
    }

    fn validate_jwt(&self) -> Result<(), Error> {
        if self.audience.as_deref().is_none_or(str::is_empty) {
            return Err(Error::MissingSetting {
                key: "auth.audience",
                mode: "jwt",
            });
        }
        if self.jwt_hs256_secret.as_deref().is_some_and(str::is_empty) {
            return Err(Error::MissingSetting {
                key: "auth.jwt_hs256_secret",
                mode: "jwt",
            });
        }
        if self.jwt_hs256_secret.is_none() && self.jwt_rs256_public_key_pem_file.is_none() {
            return Err(Error::MissingSetting {
                key: "auth.jwt_hs256_secret or auth.jwt_rs256_public_key_pem_file",
                mode: "jwt",
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    fn token(name: &str, sha256: &str) -> StaticToken {
        StaticToken {
            name: name.into(),
            role: Role::Reader,
            sha256: sha256.into(),
        }
    }

    #[test]
    fn modes_parse_and_unknown_modes_are_named() {
        assert_eq!("jwt".parse::<AuthMode>().expect("jwt"), AuthMode::Jwt);
        assert!(matches!(
            "basic".parse::<AuthMode>(),
            Err(Error::UnknownMode { .. })
        ));
    }

    #[test]
    fn tokens_mode_needs_tokens() {
        let config = AuthConfig {
            mode: AuthMode::Tokens,
            ..AuthConfig::default()
        };
        assert!(matches!(
            config.validate(),
            Err(Error::MissingSetting {
                key: "auth.tokens",
                ..
            })
        ));
    }

    #[test]
    fn token_hashes_must_be_hex_and_unique() {
        let mut config = AuthConfig {
            mode: AuthMode::Tokens,
            tokens: vec![token("ci", HASH), token("deploy", "abc")],
            ..AuthConfig::default()
        };
        assert!(matches!(
            config.validate(),
            Err(Error::TokenHash { index: 1 })
        ));
        config.tokens[1] = token("ci", &HASH.replace('9', "8"));
        assert!(matches!(
            config.validate(),
            Err(Error::DuplicateToken {
                index: 1,
                what: "name"
            })
        ));
        config.tokens[1] = token("deploy", &HASH.to_uppercase());
        assert!(matches!(
            config.validate(),
            Err(Error::DuplicateToken {
                index: 1,
                what: "sha256"
            })
        ));
    }

    #[test]
    fn jwt_mode_needs_an_audience_and_a_key() {
        let mut config = AuthConfig {
            mode: AuthMode::Jwt,
            ..AuthConfig::default()
        };
        assert!(matches!(
            config.validate(),
            Err(Error::MissingSetting {
                key: "auth.audience",
                ..
            })
        ));
        config.audience = Some("kairos".into());
        assert!(matches!(
            config.validate(),
            Err(Error::MissingSetting { mode: "jwt", .. })
        ));
        config.jwt_hs256_secret = Some(String::new());
        assert!(matches!(
            config.validate(),
            Err(Error::MissingSetting {
                key: "auth.jwt_hs256_secret",
                ..
            })
        ));
        config.jwt_hs256_secret = Some("s3cret".into());
        config.validate().expect("valid jwt config");
    }

    #[test]
    fn deserializes_with_unknown_fields_refused() {
        let config: AuthConfig = serde_json::from_value(serde_json::json!({
            "mode": "tokens",
            "tokens": [{"name": "ci", "role": "deployer", "sha256": HASH}],
        }))
        .expect("deserialize");
        assert_eq!(config.tokens[0].role, Role::Deployer);
        let typo = serde_json::from_value::<AuthConfig>(serde_json::json!({"mdoe": "none"}));
        assert!(typo.is_err());
        let bad_role = serde_json::from_value::<AuthConfig>(serde_json::json!({
            "tokens": [{"name": "ci", "role": "admin", "sha256": HASH}],
        }));
        assert!(bad_role.is_err());
    }
}
