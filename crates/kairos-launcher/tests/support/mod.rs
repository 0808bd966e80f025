//! The launch message the launcher's tests publish.

use kairos_launcher::{LaunchMessage, Source};

/// A launch of workflow `etl` version 3 for the tick 2026-03-09T07:00:00Z, run `key`,
/// attempt `attempt`.
pub fn message(key: &str, attempt: u32) -> LaunchMessage {
    LaunchMessage {
        idempotency_key: key.to_string(),
        schedule_id: "nightly".into(),
        workflow_id: "etl".into(),
        version: 3,
        user_id: "u1".into(),
        scheduled_for: "2026-03-09T07:00:00Z".into(),
        fire_at: "2026-03-09T07:00:00.250Z".into(),
        source: Source::Schedule,
        attempt,
        region: None,
        dag: std::sync::Arc::new(serde_json::json!({"nodes": [{"id": "a"}]})),
    }
}
