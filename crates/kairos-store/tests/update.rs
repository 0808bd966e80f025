//! A registrar update racing a planner's advance: the advance is never rolled back when the
//! update leaves the timing alone, and a timing change always takes the recomputed tick.

use chrono::{DateTime, Duration, Utc};
use kairos_core::{FailurePolicy, Schedule};
use kairos_store::schedules;
use kairos_testkit::TestDb;

fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("rfc3339")
}

fn write(cron_expr: &str, next_run_at: DateTime<Utc>, revision: i64) -> Schedule {
    Schedule {
        schedule_id: "s1".into(),
        workflow_id: "w".into(),
        version: 1,
        user_id: "u".into(),
        cron_expr: cron_expr.into(),
        timezone: "UTC".into(),
        start_at: None,
        end_at: None,
        next_run_at: Some(next_run_at),
        paused: false,
        jitter_ms: 0,
        overlap_policy: kairos_core::OverlapPolicy::Skip,
        catchup_policy: kairos_core::CatchupPolicy::None,
        priority: 0,
        max_run_seconds: None,
        max_queued: None,
        max_in_flight: None,
        failure: FailurePolicy {
            max_attempts: 1,
            ..Default::default()
        },
        rules: Default::default(),
        max_runs: None,
        deadline_s: None,
        region: None,
        fallback_regions: Vec::new(),
        scheduled_runs: 0,
        pause_note: None,
        paused_until: None,
        paused_by: None,
        revision,
        created_at: at("2026-01-01T00:00:00Z"),
        updated_at: at("2026-01-01T00:00:00Z"),
    }
}

#[tokio::test]
async fn an_update_never_rolls_back_a_planner_advance() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let now = at("2026-01-01T00:00:00Z");
    let read = at("2026-01-01T00:01:00Z");
    schedules::insert_many(&pool, &[write("* * * * *", read, 1)], now)
        .await
        .expect("insert");
    // A planner advances the schedule after the registrar read it.
    let advanced = read + Duration::minutes(5);
    sqlx::query("update schedules set next_run_at = $1 where schedule_id = 's1'")
        .bind(advanced)
        .execute(&pool)
        .await
        .expect("advance");

    // Same timing (only the version changes): the advance stays.
    let mut same_timing = write("* * * * *", read, 1);
    same_timing.version = 2;
    let updated = schedules::update_many(&pool, &[same_timing], now)
        .await
        .expect("update");
    assert_eq!(updated[0].version, 2);
    assert_eq!(updated[0].next_run_at, Some(advanced));

    // New spec: the registrar's recomputed tick wins.
    let recomputed = at("2026-01-01T01:00:00Z");
    let updated = schedules::update_many(&pool, &[write("0 * * * *", recomputed, 2)], now)
        .await
        .expect("update");
    assert_eq!(updated[0].next_run_at, Some(recomputed));
}
