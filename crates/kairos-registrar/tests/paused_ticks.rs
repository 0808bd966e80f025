//! Ticks that fall inside a paused span are never planned (resume plans from now on); the
//! registrar counts them on resume as `kairos_runs_skipped_total{reason="paused"}`.

use chrono::{DateTime, Utc};
use kairos_registrar::{Registrar, ScheduleInput, Settings};
use kairos_store::PgPool;
use kairos_testkit::TestDb;
use metrics_exporter_prometheus::PrometheusBuilder;

fn registrar(pool: &PgPool, now: &str) -> Registrar {
    let now: DateTime<Utc> = now.parse().expect("rfc3339");
    Registrar::new(
        pool.clone(),
        Settings {
            pinned_now: Some(now),
            ..Settings::default()
        },
    )
}

fn paused_skips(rendered: &str) -> Option<u64> {
    rendered
        .lines()
        .find(|line| line.starts_with("kairos_runs_skipped_total{reason=\"paused\"}"))
        .and_then(|line| line.rsplit(' ').next())
        .map(|value| value.parse().expect("a counter value"))
}

#[tokio::test]
async fn resume_counts_the_ticks_of_the_paused_span() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let _local = metrics::set_default_local_recorder(&recorder);
    let input = ScheduleInput {
        schedule_id: Some("every-minute".into()),
        workflow_id: "wf".into(),
        version: 1,
        user_id: "u1".into(),
        cron_expr: "* * * * *".into(),
        timezone: "UTC".into(),
        ..ScheduleInput::default()
    };
    registrar(&pool, "2026-03-09T12:00:00Z")
        .upsert(&input)
        .await
        .expect("upsert");

    registrar(&pool, "2026-03-09T12:00:30Z")
        .set_paused("every-minute", true)
        .await
        .expect("pause");
    // Pausing again is a no-op and must not move the start of the span.
    registrar(&pool, "2026-03-09T12:05:00Z")
        .set_paused("every-minute", true)
        .await
        .expect("pause");
    assert_eq!(
        paused_skips(&handle.render()),
        None,
        "nothing counted while paused"
    );

    let resumed = registrar(&pool, "2026-03-09T12:10:30Z")
        .set_paused("every-minute", false)
        .await
        .expect("resume");
    // 12:01 .. 12:10 fell inside [12:00:30, 12:10:30): ten ticks.
    assert_eq!(paused_skips(&handle.render()), Some(10));
    assert_eq!(
        resumed.next_run_at,
        Some("2026-03-09T12:11:00Z".parse().expect("t"))
    );

    // Resuming a running schedule counts nothing more.
    registrar(&pool, "2026-03-09T12:20:00Z")
        .set_paused("every-minute", false)
        .await
        .expect("resume");
    assert_eq!(paused_skips(&handle.render()), Some(10));
}
