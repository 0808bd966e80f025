//! Why a caller was refused, or why the auth config cannot be used.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::Role;

/// Everything that can go wrong in this crate.
///
/// Request-time errors: [`Error::is_unauthenticated`] ones are 401, [`Error::Forbidden`] is
/// 403. The others are config errors, found at startup.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No `Authorization` header.
    #[error("authorization header is missing")]
    MissingCredentials,
    /// An `Authorization` header that is not `Bearer <token>`.
    #[error("authorization header must be 'Bearer <token>'")]
    MalformedHeader,
    /// A bearer token that matches no `[[auth.tokens]]` entry.
    #[error("bearer token is not known")]
    UnknownToken,
    /// A JWT that failed verification or validation.
    #[error("bearer token is not a valid jwt: {reason}")]
    InvalidJwt {
        /// Which check failed.
        reason: JwtRejection,
    },
    /// The caller is authenticated but their role may not call this route.
    #[error("role {role} may not do what requires role {required}")]
    Forbidden {
        /// Who the caller is ([`crate::Principal::name`]: a token's name or a JWT's `sub`,
        /// never the token), for the refusal log; not part of the message.
        principal: String,
        /// The caller's role.
        role: Role,
        /// The role the route requires.
        required: Role,
    },

    /// A role name that is not `deployer`, `executor` or `reader`.
    #[error("role {value:?} is not one of: deployer, executor, reader")]
    UnknownRole {
        /// The name given.
        value: String,
    },
    /// An `auth.mode` that is not `none`, `tokens` or `jwt`.
    #[error("auth.mode {value:?} is not one of: none, tokens, jwt")]
    UnknownMode {
        /// The name given.
        value: String,
    },
    /// `auth.mode = none` with a bind address reachable from other machines.
    #[error("auth.mode = none is allowed only on a loopback address, not on http.bind = {bind}")]
    InsecureBind {
        /// The configured bind address.
        bind: SocketAddr,
    },
    /// A setting that the chosen mode needs is absent or empty.
    #[error("{key} must be set when auth.mode = {mode}")]
    MissingSetting {
        /// The config key (`auth.audience`).
        key: &'static str,
        /// The mode that needs it.
        mode: &'static str,
    },
    /// A static token entry whose `sha256` is not 64 hex digits.
    #[error("auth.tokens[{index}].sha256 must be 64 hex digits (the sha256 of the token)")]
    TokenHash {
        /// Position in `[[auth.tokens]]`, from 0.
        index: usize,
    },
    /// Two static token entries with the same name or the same hash.
    #[error("auth.tokens[{index}] repeats the {what} of an earlier entry")]
    DuplicateToken {
        /// Position in `[[auth.tokens]]`, from 0.
        index: usize,
        /// `name` or `sha256`.
        what: &'static str,
    },
    /// The RS256 public key file could not be read.
    #[error("cannot read auth.jwt_rs256_public_key_pem_file {path:?}")]
    KeyFile {
        /// The configured path.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The RS256 public key file is not a PEM RSA public key.
    #[error("auth.jwt_rs256_public_key_pem_file {path:?} is not a PEM RSA public key")]
    KeyFormat {
        /// The configured path.
        path: PathBuf,
    },
}

impl Error {
    /// Whether this is a credentials problem the caller must fix (HTTP 401): missing or
    /// malformed header, unknown static token, invalid JWT.
    pub fn is_unauthenticated(&self) -> bool {
        matches!(
            self,
            Error::MissingCredentials
                | Error::MalformedHeader
                | Error::UnknownToken
                | Error::InvalidJwt { .. }
        )
    }
}

/// Why a JWT was rejected. Kept coarse on purpose: the reason may be shown to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum JwtRejection {
    /// Not three base64url parts, or the header or claims are not JSON.
    Malformed,
    /// The header's `alg` is not one this server has a key for (HS256 or RS256).
    Algorithm,
    /// The signature does not match the key.
    Signature,
    /// `exp` is missing or not a number.
    MissingExpiry,
    /// `exp` is in the past (beyond the leeway).
    Expired,
    /// `nbf` is in the future (beyond the leeway).
    NotYetValid,
    /// `aud` is missing or does not contain `auth.audience`.
    Audience,
    /// The `role` claim is missing or not a string.
    MissingRole,
    /// The `role` claim names no known role.
    UnknownRole,
}

impl std::fmt::Display for JwtRejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            JwtRejection::Malformed => "malformed token",
            JwtRejection::Algorithm => {
                "algorithm not accepted (expected HS256 or RS256 as configured)"
            }
            JwtRejection::Signature => "signature does not verify",
            JwtRejection::MissingExpiry => "exp claim is missing or not a number",
            JwtRejection::Expired => "token has expired",
            JwtRejection::NotYetValid => "token is not valid yet (nbf)",
            JwtRejection::Audience => "aud claim does not contain the expected audience",
            JwtRejection::MissingRole => "role claim is missing or not a string",
            JwtRejection::UnknownRole => "role claim is not one of: deployer, executor, reader",
        })
    }
}
