//! `Authenticator` end to end: static tokens, HS256 and RS256 JWTs, roles and refusals.
//! RS256 tests sign with the test-only keys in `tests/keys/`.

use std::path::PathBuf;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use kairos_auth::{AuthConfig, AuthMode, Authenticator, Error, JwtRejection, Role, StaticToken};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const SECRET: &str = "test-hs256-secret-of-a-decent-length";
const AUDIENCE: &str = "kairos";

fn keys_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/keys")
}

fn now() -> i64 {
    let elapsed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(elapsed.as_secs()).expect("seconds fit i64")
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn tokens_authenticator() -> Authenticator {
    let entry = |name: &str, role, token: &str| StaticToken {
        name: name.into(),
        role,
        sha256: hex::encode(Sha256::digest(token.as_bytes())),
    };
    let config = AuthConfig {
        mode: AuthMode::Tokens,
        tokens: vec![
            entry("compiler", Role::Deployer, "deploy-token"),
            entry("executor-1", Role::Executor, "exec-token"),
            entry("dashboard", Role::Reader, "read-token"),
        ],
        ..AuthConfig::default()
    };
    Authenticator::from_config(&config).expect("tokens config")
}

fn jwt_authenticator() -> Authenticator {
    let config = AuthConfig {
        mode: AuthMode::Jwt,
        audience: Some(AUDIENCE.into()),
        jwt_hs256_secret: Some(SECRET.into()),
        jwt_rs256_public_key_pem_file: Some(keys_dir().join("rs256_public.pem")),
        ..AuthConfig::default()
    };
    Authenticator::from_config(&config).expect("jwt config")
}

fn claims(role: &str) -> Value {
    json!({"sub": "ci-pipeline", "aud": AUDIENCE, "exp": now() + 600, "role": role})
}

fn hs256(claims: &Value) -> String {
    let key = EncodingKey::from_secret(SECRET.as_bytes());
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &key).expect("sign hs256")
}

fn rs256_with(private_key_file: &str, claims: &Value) -> String {
    let pem = std::fs::read(keys_dir().join(private_key_file)).expect("read private key");
    let key = EncodingKey::from_rsa_pem(&pem).expect("private key");
    jsonwebtoken::encode(&Header::new(Algorithm::RS256), claims, &key).expect("sign rs256")
}

fn rs256(claims: &Value) -> String {
    rs256_with("rs256_private.pem", claims)
}

fn rejection(res: Result<kairos_auth::Principal, Error>) -> JwtRejection {
    match res {
        Err(Error::InvalidJwt { reason }) => reason,
        other => panic!("expected an invalid jwt, got {other:?}"),
    }
}

#[test]
fn static_token_identifies_its_holder_and_role() {
    let auth = tokens_authenticator();
    let principal = auth
        .authenticate(Some(&bearer("deploy-token")))
        .expect("valid token");
    assert_eq!(principal.name, "compiler");
    assert_eq!(principal.role, Some(Role::Deployer));
    let principal = auth
        .authenticate(Some(&bearer("exec-token")))
        .expect("valid token");
    assert_eq!(principal.role, Some(Role::Executor));
}

#[test]
fn wrong_static_token_is_unknown() {
    let auth = tokens_authenticator();
    let res = auth.authenticate(Some(&bearer("deploy-tokem")));
    assert!(matches!(res, Err(Error::UnknownToken)), "{res:?}");
    assert!(res.expect_err("unknown").is_unauthenticated());
}

#[test]
fn missing_and_malformed_headers_are_distinguished() {
    let auth = tokens_authenticator();
    assert!(matches!(
        auth.authenticate(None),
        Err(Error::MissingCredentials)
    ));
    assert!(matches!(
        auth.authenticate(Some("Basic Zm9vOmJhcg==")),
        Err(Error::MalformedHeader)
    ));
    assert!(matches!(
        auth.authenticate(Some("deploy-token")),
        Err(Error::MalformedHeader)
    ));
}

#[test]
fn authorize_refuses_the_wrong_role_with_forbidden() {
    let auth = tokens_authenticator();
    let reader = bearer("read-token");
    let res = auth.authorize(Some(&reader), Role::Deployer);
    assert!(
        matches!(
            res,
            Err(Error::Forbidden {
                role: Role::Reader,
                required: Role::Deployer,
                ..
            })
        ),
        "{res:?}"
    );
    assert!(!res.expect_err("forbidden").is_unauthenticated());
    auth.authorize(Some(&reader), Role::Reader)
        .expect("reader reads");
    auth.authorize(Some(&bearer("deploy-token")), Role::Reader)
        .expect("deployer reads");
    let res = auth.authorize(Some(&bearer("exec-token")), Role::Deployer);
    assert!(matches!(res, Err(Error::Forbidden { .. })), "{res:?}");
}

#[test]
fn mode_none_lets_everyone_through() {
    let auth = Authenticator::from_config(&AuthConfig::default()).expect("default config");
    assert_eq!(auth.mode(), AuthMode::None);
    let principal = auth.authorize(None, Role::Deployer).expect("open");
    assert_eq!(principal.role, None);
    auth.authorize(Some("garbage"), Role::Executor)
        .expect("header ignored");
}

#[test]
fn hs256_jwt_with_audience_and_role_is_accepted() {
    let auth = jwt_authenticator();
    let principal = auth
        .authenticate(Some(&bearer(&hs256(&claims("executor")))))
        .expect("valid");
    assert_eq!(principal.name, "ci-pipeline");
    assert_eq!(principal.role, Some(Role::Executor));
}

#[test]
fn rs256_jwt_with_audience_and_role_is_accepted() {
    let auth = jwt_authenticator();
    let principal = auth
        .authenticate(Some(&bearer(&rs256(&claims("deployer")))))
        .expect("valid");
    assert_eq!(principal.role, Some(Role::Deployer));
}

#[test]
fn audience_may_be_one_of_a_list() {
    let auth = jwt_authenticator();
    let mut claims = claims("reader");
    claims["aud"] = json!([AUDIENCE]);
    auth.authenticate(Some(&bearer(&hs256(&claims))))
        .expect("list audience");
}

#[test]
fn rs256_signed_by_another_key_is_refused() {
    let token = rs256_with("other_private.pem", &claims("deployer"));
    let res = jwt_authenticator().authenticate(Some(&bearer(&token)));
    assert_eq!(rejection(res), JwtRejection::Signature);
}

#[test]
fn hs256_signed_with_another_secret_is_refused() {
    let key = EncodingKey::from_secret(b"not-the-secret");
    let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims("reader"), &key)
        .expect("sign");
    assert_eq!(
        rejection(jwt_authenticator().authenticate(Some(&bearer(&token)))),
        JwtRejection::Signature
    );
}

#[test]
fn expired_jwt_is_refused() {
    let mut claims = claims("reader");
    claims["exp"] = json!(now() - 3600);
    let auth = jwt_authenticator();
    assert_eq!(
        rejection(auth.authenticate(Some(&bearer(&hs256(&claims))))),
        JwtRejection::Expired
    );
    assert_eq!(
        rejection(auth.authenticate(Some(&bearer(&rs256(&claims))))),
        JwtRejection::Expired
    );
}

#[test]
fn jwt_without_exp_is_refused() {
    let mut claims = claims("reader");
    claims.as_object_mut().expect("object").remove("exp");
    let res = jwt_authenticator().authenticate(Some(&bearer(&hs256(&claims))));
    assert_eq!(rejection(res), JwtRejection::MissingExpiry);
}

#[test]
fn jwt_not_yet_valid_is_refused() {
    let mut claims = claims("reader");
    claims["nbf"] = json!(now() + 3600);
    let res = jwt_authenticator().authenticate(Some(&bearer(&hs256(&claims))));
    assert_eq!(rejection(res), JwtRejection::NotYetValid);
}

#[test]
fn wrong_or_missing_audience_is_refused() {
    let auth = jwt_authenticator();
    let mut claims = claims("reader");
    claims["aud"] = json!("someone-else");
    assert_eq!(
        rejection(auth.authenticate(Some(&bearer(&hs256(&claims))))),
        JwtRejection::Audience
    );
    assert_eq!(
        rejection(auth.authenticate(Some(&bearer(&rs256(&claims))))),
        JwtRejection::Audience
    );
    claims.as_object_mut().expect("object").remove("aud");
    assert_eq!(
        rejection(auth.authenticate(Some(&bearer(&hs256(&claims))))),
        JwtRejection::Audience
    );
}

#[test]
fn wrong_or_missing_role_claim_is_refused() {
    let auth = jwt_authenticator();
    let res = auth.authenticate(Some(&bearer(&hs256(&claims("admin")))));
    assert_eq!(rejection(res), JwtRejection::UnknownRole);
    let mut claims = claims("reader");
    claims["role"] = json!(["deployer"]);
    assert_eq!(
        rejection(auth.authenticate(Some(&bearer(&hs256(&claims))))),
        JwtRejection::MissingRole
    );
    claims.as_object_mut().expect("object").remove("role");
    assert_eq!(
        rejection(auth.authenticate(Some(&bearer(&hs256(&claims))))),
        JwtRejection::MissingRole
    );
}

#[test]
fn jwt_role_decides_authorization() {
    let auth = jwt_authenticator();
    let reader = bearer(&rs256(&claims("reader")));
    let res = auth.authorize(Some(&reader), Role::Executor);
    assert!(matches!(res, Err(Error::Forbidden { .. })), "{res:?}");
    auth.authorize(Some(&reader), Role::Reader)
        .expect("reader reads");
}

#[test]
fn algorithm_without_a_configured_key_is_refused() {
    let config = AuthConfig {
        mode: AuthMode::Jwt,
        audience: Some(AUDIENCE.into()),
        jwt_hs256_secret: Some(SECRET.into()),
        ..AuthConfig::default()
    };
    let auth = Authenticator::from_config(&config).expect("hs256 only");
    let res = auth.authenticate(Some(&bearer(&rs256(&claims("reader")))));
    assert_eq!(rejection(res), JwtRejection::Algorithm);
    let key = EncodingKey::from_secret(SECRET.as_bytes());
    let hs512 = jsonwebtoken::encode(&Header::new(Algorithm::HS512), &claims("reader"), &key)
        .expect("sign hs512");
    assert_eq!(
        rejection(auth.authenticate(Some(&bearer(&hs512)))),
        JwtRejection::Algorithm
    );
}

#[test]
fn rs256_public_key_is_not_accepted_as_an_hs256_secret() {
    // The classic algorithm-confusion attack: sign HS256 with the public key's PEM bytes.
    let public_pem = std::fs::read(keys_dir().join("rs256_public.pem")).expect("public key");
    let config = AuthConfig {
        mode: AuthMode::Jwt,
        audience: Some(AUDIENCE.into()),
        jwt_rs256_public_key_pem_file: Some(keys_dir().join("rs256_public.pem")),
        ..AuthConfig::default()
    };
    let auth = Authenticator::from_config(&config).expect("rs256 only");
    let key = EncodingKey::from_secret(&public_pem);
    let forged = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims("deployer"), &key)
        .expect("sign");
    assert_eq!(
        rejection(auth.authenticate(Some(&bearer(&forged)))),
        JwtRejection::Algorithm
    );
}

/// base64url without padding, for hand-made tokens.
fn b64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

#[test]
fn alg_none_and_unsigned_tokens_are_refused() {
    let auth = jwt_authenticator();
    let body = b64(claims("deployer").to_string().as_bytes());
    for alg in ["none", "None", "NONE"] {
        let header = b64(format!(r#"{{"alg":"{alg}","typ":"JWT"}}"#).as_bytes());
        for token in [format!("{header}.{body}."), format!("{header}.{body}")] {
            let res = auth.authorize(Some(&bearer(&token)), Role::Reader);
            assert!(
                matches!(res, Err(Error::InvalidJwt { .. })),
                "alg {alg}: {res:?}"
            );
        }
    }
    // A real HS256 or RS256 header with the signature cut off.
    for signed in [hs256(&claims("deployer")), rs256(&claims("deployer"))] {
        let unsigned = format!("{}.", signed.rsplit_once('.').expect("three parts").0);
        let res = auth.authorize(Some(&bearer(&unsigned)), Role::Reader);
        assert!(matches!(res, Err(Error::InvalidJwt { .. })), "{res:?}");
    }
}

#[test]
fn garbage_jwt_is_malformed() {
    let res = jwt_authenticator().authenticate(Some("Bearer not.a.jwt"));
    assert_eq!(rejection(res), JwtRejection::Malformed);
}

#[test]
fn unreadable_or_invalid_key_file_is_a_config_error() {
    let mut config = AuthConfig {
        mode: AuthMode::Jwt,
        audience: Some(AUDIENCE.into()),
        jwt_rs256_public_key_pem_file: Some(keys_dir().join("missing.pem")),
        ..AuthConfig::default()
    };
    assert!(matches!(
        Authenticator::from_config(&config),
        Err(Error::KeyFile { .. })
    ));
    config.jwt_rs256_public_key_pem_file = Some(keys_dir().join("README.md"));
    assert!(matches!(
        Authenticator::from_config(&config),
        Err(Error::KeyFormat { .. })
    ));
}
