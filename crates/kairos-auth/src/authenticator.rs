//! Turning an `Authorization` header into a [`Principal`].

use std::fmt;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::{AuthConfig, AuthMode, Error, JwtRejection, Result, Role};

/// The JWT claim that carries the caller's role: a string, one of `deployer`, `executor`,
/// `reader`. The principal's name comes from `sub` (or is `"jwt"` when there is none).
pub const ROLE_CLAIM: &str = "role";

/// Seconds of clock skew tolerated on `exp` and `nbf`.
const LEEWAY_S: u64 = 30;

/// Who is calling, once authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The static token's `name`, or the JWT's `sub`; `"anonymous"` when auth is off.
    pub name: String,
    /// The caller's role; `None` only when `auth.mode = none`, where every route is open.
    pub role: Option<Role>,
}

impl Principal {
    fn anonymous() -> Self {
        Principal {
            name: "anonymous".to_owned(),
            role: None,
        }
    }

    /// Whether this caller may call a route that requires `required` (see [`Role::allows`]);
    /// always true when auth is off.
    pub fn allows(&self, required: Role) -> bool {
        self.role.is_none_or(|role| role.allows(required))
    }
}

/// Checks bearer tokens according to the `[auth]` config. Cheap to share (`Arc`) across
/// requests; holds no secrets in its `Debug` output.
pub struct Authenticator {
    check: Check,
}

enum Check {
    Open,
    Tokens(Vec<HashedToken>),
    Jwt(JwtKeys),
}

struct HashedToken {
    name: String,
    role: Role,
    digest: [u8; 32],
}

struct JwtKeys {
    audience: String,
    hs256: Option<DecodingKey>,
    rs256: Option<DecodingKey>,
}

#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<serde_json::Value>,
    #[serde(default)]
    role: Option<serde_json::Value>,
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authenticator")
            .field("mode", &self.mode())
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// Builds the checker for `config`, reading the RS256 public key file if one is set.
    /// Does not look at the bind address: call [`crate::check_bind`] for that.
    ///
    /// # Errors
    /// Whatever [`AuthConfig::validate`] finds, [`Error::KeyFile`] if the PEM file cannot be
    /// read and [`Error::KeyFormat`] if it holds no RSA public key.
    pub fn from_config(config: &AuthConfig) -> Result<Self> {
        config.validate()?;
        let check = match config.mode {
            AuthMode::None => Check::Open,
            AuthMode::Tokens => Check::Tokens(hash_tokens(config)?),
            AuthMode::Jwt => Check::Jwt(jwt_keys(config)?),
        };
        Ok(Authenticator { check })
    }

    /// The mode this authenticator enforces.
    pub fn mode(&self) -> AuthMode {
        match self.check {
            Check::Open => AuthMode::None,
            Check::Tokens(_) => AuthMode::Tokens,
            Check::Jwt(_) => AuthMode::Jwt,
        }
    }

    /// Identifies the caller from the raw `Authorization` header value (`None` when the
    /// request has none). With `auth.mode = none` the header is ignored and the caller is
    /// `anonymous` with no role restriction.
    ///
    /// # Errors
    /// All map to 401: [`Error::MissingCredentials`], [`Error::MalformedHeader`] (not
    /// `Bearer <token>`), [`Error::UnknownToken`] (static tokens), [`Error::InvalidJwt`].
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<Principal> {
        if let Check::Open = self.check {
            return Ok(Principal::anonymous());
        }
        let token = bearer_token(authorization.ok_or(Error::MissingCredentials)?)?;
        match &self.check {
            Check::Open => Ok(Principal::anonymous()),
            Check::Tokens(tokens) => find_token(tokens, token),
            Check::Jwt(keys) => verify_jwt(keys, token),
        }
    }

    /// [`Authenticator::authenticate`], then checks that the caller's role allows `required`.
    ///
    /// # Errors
    /// The 401 errors of `authenticate`, or [`Error::Forbidden`] (403).
    pub fn authorize(&self, authorization: Option<&str>, required: Role) -> Result<Principal> {
        let principal = self.authenticate(authorization)?;
        match principal.role {
            Some(role) if !role.allows(required) => Err(Error::Forbidden {
                principal: principal.name,
                role,
                required,
            }),
            _ => Ok(principal),
        }
    }
}

/// Extracts `<token>` from `Bearer <token>` (scheme case-insensitive, as RFC 7235 says).
fn bearer_token(header: &str) -> Result<&str> {
    let (scheme, token) = header
        .trim()
        .split_once(' ')
        .ok_or(Error::MalformedHeader)?;
    let token = token.trim_start();
    let well_formed = scheme.eq_ignore_ascii_case("bearer")
        && !token.is_empty()
        && !token.contains(char::is_whitespace);
    if well_formed {
        Ok(token)
    } else {
        Err(Error::MalformedHeader)
    }
}

fn hash_tokens(config: &AuthConfig) -> Result<Vec<HashedToken>> {
    config
        .tokens
        .iter()
        .enumerate()
        .map(|(index, token)| {
            let mut digest = [0u8; 32];
            hex::decode_to_slice(&token.sha256, &mut digest)
                .map_err(|_| Error::TokenHash { index })?;
            Ok(HashedToken {
                name: token.name.clone(),
                role: token.role,
                digest,
            })
        })
        .collect()
}

fn find_token(tokens: &[HashedToken], token: &str) -> Result<Principal> {
    let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
    // Compare against every entry in constant time and without stopping at the first
    // match, so timing reveals neither the hash prefix nor the matching entry's position.
    let mut found = None;
    for entry in tokens {
        if bool::from(entry.digest.ct_eq(&digest)) {
            found = Some(entry);
        }
    }
    let entry = found.ok_or(Error::UnknownToken)?;
    Ok(Principal {
        name: entry.name.clone(),
        role: Some(entry.role),
    })
}

fn jwt_keys(config: &AuthConfig) -> Result<JwtKeys> {
    let hs256 = config
        .jwt_hs256_secret
        .as_deref()
        .map(|secret| DecodingKey::from_secret(secret.as_bytes()));
    let rs256 = match &config.jwt_rs256_public_key_pem_file {
        None => None,
        Some(path) => {
            let pem = std::fs::read(path).map_err(|source| Error::KeyFile {
                path: path.clone(),
                source,
            })?;
            let key = DecodingKey::from_rsa_pem(&pem)
                .map_err(|_| Error::KeyFormat { path: path.clone() })?;
            Some(key)
        }
    };
    // Invariant: `validate` guaranteed an audience in jwt mode.
    let audience = config.audience.clone().unwrap_or_default();
    Ok(JwtKeys {
        audience,
        hs256,
        rs256,
    })
}

fn verify_jwt(keys: &JwtKeys, token: &str) -> Result<Principal> {
    let reject = |reason| Error::InvalidJwt { reason };
    let header = jsonwebtoken::decode_header(token).map_err(|_| reject(JwtRejection::Malformed))?;
    // The key is chosen by the header's algorithm, and the validation accepts exactly that
    // algorithm, so an RS256 public key can never be used as an HS256 secret.
    let key = match header.alg {
        Algorithm::HS256 => keys.hs256.as_ref(),
        Algorithm::RS256 => keys.rs256.as_ref(),
        _ => None,
    };
    let key = key.ok_or(reject(JwtRejection::Algorithm))?;
    let mut validation = Validation::new(header.alg);
    validation.set_audience(&[&keys.audience]);
    validation.set_required_spec_claims(&["exp", "aud"]);
    validation.validate_nbf = true;
    validation.leeway = LEEWAY_S;
    let data = jsonwebtoken::decode::<Claims>(token, key, &validation)
        .map_err(|error| reject(rejection(error.kind())))?;
    let role = match data.claims.role {
        Some(serde_json::Value::String(role)) => role,
        _ => return Err(reject(JwtRejection::MissingRole)),
    };
    let role = role
        .parse::<Role>()
        .map_err(|_| reject(JwtRejection::UnknownRole))?;
    let name = match data.claims.sub {
        Some(serde_json::Value::String(sub)) if !sub.is_empty() => sub,
        _ => "jwt".to_owned(),
    };
    Ok(Principal {
        name,
        role: Some(role),
    })
}

fn rejection(kind: &ErrorKind) -> JwtRejection {
    match kind {
        ErrorKind::InvalidSignature | ErrorKind::InvalidRsaKey(_) | ErrorKind::InvalidKeyFormat => {
            JwtRejection::Signature
        }
        ErrorKind::InvalidAlgorithm
        | ErrorKind::InvalidAlgorithmName
        | ErrorKind::UnsupportedAlgorithm => JwtRejection::Algorithm,
        ErrorKind::ExpiredSignature => JwtRejection::Expired,
        ErrorKind::ImmatureSignature => JwtRejection::NotYetValid,
        ErrorKind::InvalidAudience => JwtRejection::Audience,
        ErrorKind::MissingRequiredClaim(claim) | ErrorKind::InvalidClaimFormat(claim) => {
            match claim.as_str() {
                "aud" => JwtRejection::Audience,
                "exp" => JwtRejection::MissingExpiry,
                _ => JwtRejection::Malformed,
            }
        }
        _ => JwtRejection::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_header_shapes() {
        assert_eq!(bearer_token("Bearer abc").expect("plain"), "abc");
        assert_eq!(
            bearer_token("bearer   abc ").expect("case and spaces"),
            "abc"
        );
        for bad in ["", "Bearer", "Bearer ", "Basic abc", "Bearer a b", "abc"] {
            assert!(
                matches!(bearer_token(bad), Err(Error::MalformedHeader)),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn anonymous_principal_is_unrestricted() {
        let principal = Principal::anonymous();
        assert!(principal.allows(Role::Deployer) && principal.allows(Role::Executor));
    }
}
