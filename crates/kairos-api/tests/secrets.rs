//! No bearer token, password or secret ever appears in the log or in an
//! answer. The API runs with JWT auth; every kind of good and bad credential is sent, the
//! whole log (TRACE, every target) is captured, and both are searched for the secrets.

use crate::common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{header, Method, Request};
use axum::Router;
use common::*;
use http_body_util::BodyExt;
use jsonwebtoken::{encode, EncodingKey, Header};
use kairos_api::{app, AppState};
use kairos_auth::{AuthConfig, AuthMode, Authenticator};
use kairos_registrar::{Registrar, Settings};
use kairos_store::PgPool;
use kairos_testkit::TestDb;
use kairos_worker::intake::Intake;
use serde_json::json;
use tower::ServiceExt;

const SECRET: &str = "hs256-secret-that-must-never-be-shown";
const AUDIENCE: &str = "kairos";

fn jwt_router(pool: PgPool) -> Router {
    let config = AuthConfig {
        mode: AuthMode::Jwt,
        audience: Some(AUDIENCE.into()),
        jwt_hs256_secret: Some(SECRET.into()),
        ..AuthConfig::default()
    };
    app(AppState {
        intake: Intake::new(pool.clone()),
        nats: None,
        registrar: Registrar::new(pool, Settings::default()),
        auth: Arc::new(Authenticator::from_config(&config).expect("jwt config")),
        max_body_bytes: MAX_BODY,
        allowed_hosts: allowed_hosts(),
        metrics: None,
        status_subjects: kairos_launcher::status::StatusSubjects {
            prefix: "kairos".into(),
            partitions: 16,
        },
    })
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn jwt(claims: serde_json::Value, secret: &str) -> String {
    encode(
        &Header::default(),
        &claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .expect("encode")
}

/// base64url without padding, for the hand-made `alg: none` token.
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

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log lock").extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn no_token_password_or_secret_reaches_the_log_or_an_answer() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = jwt_router(pool.clone());
    let log = Captured::default();
    let sink = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::TRACE)
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);

    let exp = now() + 600;
    let good = jwt(
        json!({"sub": "ci", "aud": AUDIENCE, "exp": exp, "role": "deployer"}),
        SECRET,
    );
    let reader = jwt(
        json!({"sub": "dash", "aud": AUDIENCE, "exp": exp, "role": "reader"}),
        SECRET,
    );
    let none_header = b64(br#"{"alg":"none","typ":"JWT"}"#);
    let none_claims = b64(
        json!({"sub": "x", "aud": AUDIENCE, "exp": exp, "role": "deployer"})
            .to_string()
            .as_bytes(),
    );
    let credentials = [
        format!("Bearer {good}"),
        format!("Bearer {reader}"),
        format!(
            "Bearer {}",
            jwt(
                json!({"aud": "other", "exp": exp, "role": "deployer"}),
                SECRET
            )
        ),
        format!(
            "Bearer {}",
            jwt(
                json!({"aud": AUDIENCE, "exp": now() - 3600, "role": "deployer"}),
                SECRET
            )
        ),
        format!(
            "Bearer {}",
            jwt(
                json!({"aud": AUDIENCE, "exp": exp, "role": "admin"}),
                SECRET
            )
        ),
        format!(
            "Bearer {}",
            jwt(
                json!({"aud": AUDIENCE, "exp": exp, "role": "deployer"}),
                "guessed-secret"
            )
        ),
        format!("Bearer {none_header}.{none_claims}."),
        "Bearer static-token-guess-123".to_string(),
        "Basic YWRtaW46aHVudGVyMi1wYXNzd29yZA==".to_string(), // admin:hunter2-password
        "hunter2-password".to_string(),
    ];
    let mut answers = String::new();
    for authorization in &credentials {
        for (method, uri, body) in [
            (Method::POST, "/schedules/upsert", seed_body().to_string()),
            (Method::GET, "/schedules/nightly-report", String::new()),
            (Method::POST, "/runs/k/status", "{}".to_string()),
        ] {
            let request = Request::builder()
                .method(method)
                .uri(uri)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::AUTHORIZATION, authorization)
                .body(Body::from(body))
                .expect("request");
            let response = api.clone().oneshot(request).await.expect("infallible");
            answers.push_str(&format!("{response:?}\n"));
            let bytes = response
                .into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes();
            answers.push_str(&String::from_utf8_lossy(&bytes));
            answers.push('\n');
        }
    }
    let log = String::from_utf8(log.0.lock().expect("log lock").clone()).expect("utf-8");
    assert!(
        log.contains("request refused: unauthenticated"),
        "the log was captured: {log}"
    );
    assert!(log.contains("request refused: forbidden"), "{log}");
    assert!(
        answers.contains("\"status\":401") && answers.contains("\"status\":403"),
        "{answers}"
    );
    let mut secrets = vec![
        SECRET.to_string(),
        "hunter2-password".into(),
        "YWRtaW46aHVudGVy".into(),
        "static-token-guess-123".into(),
    ];
    for authorization in &credentials {
        let token = authorization.rsplit(' ').next().expect("token");
        // The signature part of a JWT is what makes it a credential; the payload is not secret.
        secrets.push(
            token
                .rsplit('.')
                .find(|part| !part.is_empty())
                .expect("part")
                .to_string(),
        );
        secrets.push(token.to_string());
    }
    for secret in &secrets {
        assert!(
            !log.contains(secret.as_str()),
            "the log shows {secret:?}:\n{log}"
        );
        assert!(
            !answers.contains(secret.as_str()),
            "an answer shows {secret:?}:\n{answers}"
        );
    }
}
