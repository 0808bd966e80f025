//! Authentication of kairos HTTP callers (docs/design.md §6).
//!
//! Callers present `Authorization: Bearer <token>`. Depending on `[auth] mode` the token is:
//!
//! - `none`: not looked at; every caller is let through. Allowed only on a loopback bind
//!   address ([`check_bind`]).
//! - `tokens`: one of the static tokens of `[[auth.tokens]]`, stored as the hex sha256 of the
//!   token and compared in constant time.
//! - `jwt`: a JWT signed with HS256 (`auth.jwt_hs256_secret`) or RS256
//!   (`auth.jwt_rs256_public_key_pem_file`), whose `aud` contains `auth.audience`, whose `exp`
//!   lies in the future, and whose `role` claim names a [`Role`].
//!
//! The crate answers "who is this and what role do they hold" ([`Authenticator::authenticate`])
//! and "may they do this" ([`Principal::allows`], [`Authenticator::authorize`]); the HTTP layer
//! maps [`Error::is_unauthenticated`] to 401 and [`Error::Forbidden`] to 403.
//! It has no HTTP types and no async.

mod authenticator;
mod config;
mod error;
mod role;

use std::net::SocketAddr;

pub use authenticator::{Authenticator, Principal, ROLE_CLAIM};
pub use config::{AuthConfig, AuthMode, StaticToken};
pub use error::{Error, JwtRejection};
pub use role::Role;

/// The name the API helper and the brief use for [`Error`].
pub type AuthError = Error;

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Refuses `auth.mode = none` unless `bind` is a loopback address (`127.0.0.0/8`, `::1`, or
/// `::ffff:127.x.x.x`). Every other mode is allowed on any address.
///
/// # Errors
/// [`Error::InsecureBind`] when the mode is `none` and the address is not loopback.
pub fn check_bind(mode: AuthMode, bind: SocketAddr) -> Result<()> {
    // `to_canonical` turns an IPv4-mapped IPv6 address back into IPv4, whose loopback test
    // covers the whole 127.0.0.0/8 range.
    if mode == AuthMode::None && !bind.ip().to_canonical().is_loopback() {
        return Err(Error::InsecureBind { bind });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddr {
        text.parse().expect("socket address")
    }

    #[test]
    fn mode_none_is_allowed_on_loopback_only() {
        for loopback in [
            "127.0.0.1:8080",
            "127.1.2.3:1",
            "[::1]:8080",
            "[::ffff:127.0.0.1]:80",
        ] {
            check_bind(AuthMode::None, addr(loopback)).expect(loopback);
        }
        for open in [
            "0.0.0.0:8080",
            "10.0.0.5:8080",
            "[::]:8080",
            "[2001:db8::1]:80",
        ] {
            let res = check_bind(AuthMode::None, addr(open));
            assert!(
                matches!(res, Err(Error::InsecureBind { .. })),
                "{open}: {res:?}"
            );
        }
    }

    #[test]
    fn other_modes_are_allowed_anywhere() {
        check_bind(AuthMode::Tokens, addr("0.0.0.0:8080")).expect("tokens");
        check_bind(AuthMode::Jwt, addr("[::]:8080")).expect("jwt");
    }
}
