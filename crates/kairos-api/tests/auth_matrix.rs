//! The auth matrix of every route, written out by hand (not derived from
//! `kairos_api::routes()`, so a route whose role changes by mistake fails here), checked
//! with no token, an unknown token, a malformed header, and each role's token. Refusals are
//! logged without the token and counted.

use crate::common;

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::{Arc, Mutex};

use axum::http::{Method, StatusCode};
use common::*;
use kairos_testkit::prometheus::sample;
use kairos_testkit::TestDb;
use serde_json::json;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    /// No token needed.
    Anyone,
    /// Any valid token (every role reads).
    AnyRole,
    /// Only the deployer's token.
    Deployer,
    /// Only the executor's token.
    Executor,
}

/// Every route with who may call it (paths with sample ids).
const MATRIX: &[(&str, &str, Who)] = &[
    ("POST", "/schedules/upsert", Who::Deployer),
    ("POST", "/schedules/pause", Who::Deployer),
    ("POST", "/schedules/preview", Who::AnyRole),
    ("GET", "/schedules", Who::AnyRole),
    ("GET", "/schedules/s1", Who::AnyRole),
    ("DELETE", "/schedules/s1", Who::Deployer),
    ("GET", "/schedules/s1/runs", Who::AnyRole),
    ("GET", "/schedules/s1/history", Who::AnyRole),
    ("GET", "/history", Who::AnyRole),
    ("POST", "/schedules/s1/trigger", Who::Deployer),
    ("POST", "/schedules/s1/backfill", Who::Deployer),
    ("POST", "/schedules/s1/skips", Who::Deployer),
    ("GET", "/schedules/s1/skips", Who::AnyRole),
    (
        "DELETE",
        "/schedules/s1/skips/2026-03-09T07:00:00Z",
        Who::Deployer,
    ),
    ("PUT", "/workflows/wf/versions/1", Who::Deployer),
    ("GET", "/workflows/wf/versions/1", Who::AnyRole),
    ("GET", "/workflows", Who::AnyRole),
    ("GET", "/workflows/wf/versions", Who::AnyRole),
    ("POST", "/runs/k1/status", Who::Executor),
    ("POST", "/runs/status", Who::Executor),
    ("GET", "/runs/k1", Who::AnyRole),
    ("POST", "/runs/k1/retry", Who::Deployer),
    ("POST", "/runs/k1/cancel", Who::Deployer),
    ("GET", "/dead-letters", Who::AnyRole),
    ("GET", "/runs", Who::AnyRole),
    ("PUT", "/calendars/c1", Who::Deployer),
    ("GET", "/calendars/c1", Who::AnyRole),
    ("DELETE", "/calendars/c1", Who::Deployer),
    ("GET", "/calendars", Who::AnyRole),
    ("POST", "/run-launcher/start", Who::Executor),
    ("GET", "/healthz", Who::Anyone),
    ("GET", "/openapi.json", Who::Anyone),
    ("GET", "/readyz", Who::Anyone),
    ("GET", "/metrics", Who::Anyone),
    // The operator page: shells and assets hold no data; fragments are reads.
    ("GET", "/ui", Who::Anyone),
    ("GET", "/ui/schedules/s1", Who::Anyone),
    ("GET", "/ui/runs", Who::Anyone),
    ("GET", "/ui/runs/k1", Who::Anyone),
    ("GET", "/ui/workflows/wf", Who::Anyone),
    ("GET", "/ui/assets/app.js", Who::Anyone),
    ("GET", "/ui/assets/app.css", Who::Anyone),
    ("GET", "/ui/fragments/schedules", Who::AnyRole),
    ("GET", "/ui/fragments/schedules/s1", Who::AnyRole),
    ("GET", "/ui/fragments/schedules/s1/backfill", Who::AnyRole),
    ("GET", "/ui/fragments/runs", Who::AnyRole),
    ("GET", "/ui/fragments/runs/k1", Who::AnyRole),
    ("GET", "/ui/fragments/workflows/wf", Who::AnyRole),
];

/// The route template a sample path stands for.
fn template(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').collect();
    let mut out = Vec::new();
    for (index, part) in parts.iter().enumerate() {
        out.push(match (parts.get(1).copied(), index, *part) {
            (Some("schedules"), 2, "s1") => "{id}",
            (Some("schedules"), 4, _) => "{run_at}",
            (Some("ui"), 3 | 4, "s1" | "wf") => "{id}",
            (Some("ui"), 3 | 4, "k1") => "{key}",
            (Some("workflows"), 2, _) => "{id}",
            (Some("workflows"), 4, _) => "{version}",
            (Some("runs"), 2, "k1") => "{key}",
            (Some("calendars"), 2, _) => "{name}",
            _ => part,
        });
    }
    out.join("/")
}

#[test]
fn the_matrix_names_every_route_once() {
    let written: BTreeSet<(String, String)> = MATRIX
        .iter()
        .map(|(method, path, _)| (method.to_string(), template(path)))
        .collect();
    assert_eq!(written.len(), MATRIX.len(), "a route is listed twice");
    let served: BTreeSet<(String, String)> = kairos_api::routes()
        .iter()
        .map(|route| (route.method.to_string(), route.path.to_string()))
        .collect();
    assert_eq!(written, served, "the matrix and the router differ");
}

/// A log sink shared with the test.
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
async fn every_route_answers_by_the_matrix_and_refusals_are_logged_and_counted() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let api = router(pool.clone(), "2026-03-08T12:00:00Z");
    let log = Captured::default();
    let sink = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::TRACE)
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);
    let recorder = kairos_worker::metrics::recorder();
    let handle = recorder.handle();
    let _metrics = metrics::set_default_local_recorder(&recorder);

    let (mut unauthenticated, mut forbidden) = (0, 0);
    for (method, path, who) in MATRIX {
        let method: Method = method.parse().expect("method");
        let body = Some(json!({}));
        let refused = |status: StatusCode| {
            status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN
        };
        let (status, _, _) = call(&api, method.clone(), path, None, body.clone()).await;
        if *who == Who::Anyone {
            assert!(
                !refused(status),
                "{method} {path} without a token: {status}"
            );
            continue;
        }
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "{method} {path} without a token"
        );
        let (status, _, _) = call(
            &api,
            method.clone(),
            path,
            Some("not-a-token"),
            body.clone(),
        )
        .await;
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "{method} {path} unknown token"
        );
        unauthenticated += 2;
        for (token, role) in [
            (DEPLOYER, Who::Deployer),
            (EXECUTOR, Who::Executor),
            (READER, Who::AnyRole),
        ] {
            let (status, kind, answer) =
                call(&api, method.clone(), path, Some(token), body.clone()).await;
            let allowed = *who == Who::AnyRole || *who == role;
            if allowed {
                assert!(
                    !refused(status),
                    "{method} {path} as {token}: {status} {answer}"
                );
            } else {
                assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path} as {token}");
                assert_eq!(kind, "application/problem+json");
                forbidden += 1;
            }
        }
    }
    assert_eq!(
        table_counts(&pool).await.0,
        0,
        "a refused request stored nothing"
    );

    let text = handle.render();
    let count = |outcome| {
        sample(
            &text,
            "kairos_http_auth_refusals_total",
            &[("outcome", outcome)],
        )
        .unwrap_or_else(|| panic!("no {outcome} count in:\n{text}"))
    };
    assert_eq!(count("unauthenticated"), f64::from(unauthenticated));
    assert_eq!(count("forbidden"), f64::from(forbidden));

    let log = String::from_utf8(log.0.lock().expect("log lock").clone()).expect("utf-8");
    let lines = |needle: &str| log.lines().filter(|line| line.contains(needle)).count();
    assert_eq!(
        lines("request refused: unauthenticated"),
        unauthenticated as usize,
        "{log}"
    );
    assert_eq!(
        lines("request refused: forbidden"),
        forbidden as usize,
        "{log}"
    );
    assert!(
        log.contains("caller=dashboard"),
        "a 403 names the caller: {log}"
    );
    for secret in ["not-a-token", DEPLOYER, EXECUTOR, READER] {
        assert!(!log.contains(secret), "the log shows {secret:?}:\n{log}");
    }
}
