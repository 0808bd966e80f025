//! The launch message as sent is valid against `schemas/launch.schema.json`, the contract an
//! executor in any language is written from.

use chrono::{DateTime, Utc};
use kairos_launcher::{LaunchMessage, Source};

fn validator() -> jsonschema::Validator {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../schemas/launch.schema.json"
    );
    let text = std::fs::read_to_string(path).expect("read launch schema");
    let schema = serde_json::from_str(&text).expect("schema is JSON");
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("schema compiles")
}

fn message(source: Source, attempt: u32, fire_at: DateTime<Utc>) -> LaunchMessage {
    LaunchMessage {
        idempotency_key: "5f0c9d3e1a2b4c6d8e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d".into(),
        schedule_id: "nightly-etl".into(),
        workflow_id: "etl".into(),
        version: 7,
        user_id: "team-data".into(),
        scheduled_for: LaunchMessage::timestamp("2026-03-09T07:00:00Z".parse().expect("t")),
        fire_at: LaunchMessage::timestamp(fire_at),
        source,
        attempt,
        region: None,
        dag: std::sync::Arc::new(
            serde_json::json!({"nodes": [{"id": "extract"}, {"id": "load", "depends_on": ["extract"]}]}),
        ),
    }
}

#[test]
fn every_source_and_attempt_validates() {
    let validator = validator();
    let fire_at: DateTime<Utc> = "2026-03-09T07:00:00.250Z".parse().expect("t");
    for source in [
        Source::Schedule,
        Source::Manual,
        Source::Backfill,
        Source::Api,
    ] {
        for attempt in [1, 2] {
            let sent = message(source, attempt, fire_at).encode_reporting_on("kairos.status.3.k");
            let body: serde_json::Value = serde_json::from_slice(&sent).expect("json");
            let errors: Vec<String> = validator
                .iter_errors(&body)
                .map(|e| e.to_string())
                .collect();
            assert!(errors.is_empty(), "{body}: {errors:?}");
        }
    }
}

#[test]
fn timestamps_are_utc_with_z_and_fractions_only_when_present() {
    assert_eq!(
        LaunchMessage::timestamp("2026-03-09T07:00:00Z".parse().expect("t")),
        "2026-03-09T07:00:00Z"
    );
    assert_eq!(
        LaunchMessage::timestamp("2026-03-09T08:00:00.250+01:00".parse().expect("t")),
        "2026-03-09T07:00:00.250Z"
    );
}

#[test]
fn a_cancel_message_validates_against_its_schema() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../schemas/cancel.schema.json"
    );
    let text = std::fs::read_to_string(path).expect("read cancel schema");
    let schema = serde_json::from_str(&text).expect("schema is JSON");
    let validator = jsonschema::options()
        .build(&schema)
        .expect("schema compiles");
    for run_id in [None, Some("r-1".to_string())] {
        let cancel = kairos_launcher::CancelMessage {
            idempotency_key: "a".repeat(64),
            run_id,
            attempt: 2,
            reason: Some("cancelled by an operator".into()),
            workflow_id: "wf".into(),
            schedule_id: "nightly".into(),
            requested_at: "2026-03-09T07:00:00Z".into(),
        };
        let body: serde_json::Value = serde_json::from_slice(&cancel.encode()).expect("JSON");
        assert!(validator.is_valid(&body), "{body}");
        assert!(
            body.get("workflow_id").is_none(),
            "the workflow is in the subject"
        );
        assert_eq!(cancel.subject("kairos"), "kairos.cancel.wf");
        assert_eq!(cancel.msg_id(), format!("{}:cancel:2", "a".repeat(64)));
    }
}
