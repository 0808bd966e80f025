//! The schedules overview's charts of the last day through the real router on a real
//! database: outcomes per hour and fire drift per hour across all schedules, counting only
//! runs planned in (now − 24 h, now].

use crate::common;

use axum::http::{Method, StatusCode};
use common::{call, deploy_workflow, router, ts, DEPLOYER, READER};
use kairos_core::{RunKey, RunSource, RunStatus};
use kairos_store::runs::{self, NewRun};
use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use serde_json::json;

const NOW: &str = "2026-03-05T12:00:00Z";

/// A run of `id` planned (and fired) at `at`; published `drift_ms` after that if given.
async fn insert_run(
    pool: &kairos_store::PgPool,
    id: &str,
    at: &str,
    status: RunStatus,
    drift_ms: Option<i64>,
) {
    let key = RunKey::tick(id, ts(at)).as_str().to_string();
    let run = NewRun {
        idempotency_key: key.clone(),
        schedule_id: id.into(),
        run_at: ts(at),
        fire_at: ts(at),
        status,
        source: RunSource::Schedule,
        overlap: None,
        workflow_id: "wa".into(),
        version: 1,
        user_id: "u1".into(),
    };
    runs::insert(pool, &run, ts(at)).await.expect("insert run");
    if let Some(ms) = drift_ms {
        sqlx::query(
            "update schedule_runs set published_at = fire_at + make_interval(secs => $2 / 1000.0) \
             where idempotency_key = $1",
        )
        .bind(&key)
        .bind(ms as f64)
        .execute(pool)
        .await
        .expect("publish run");
    }
}

#[tokio::test]
async fn overview_charts_count_the_last_day_across_schedules() {
    let db = TestDb::new().await;
    let pool = db.pool().clone();
    let api = router(db.pool(), NOW);
    deploy_workflow(&api, "wa", 1).await;
    for id in ["s1", "s2"] {
        let (status, _, answer) = call(
            &api,
            Method::POST,
            "/schedules/upsert",
            Some(DEPLOYER),
            Some(json!({"schedule_id": id, "workflow_id": "wa", "version": 1,
                        "user_id": "u1", "cron_expr": "0 7 * * *", "timezone": "UTC"})),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
    }
    // s1, the hour ending 1 h ago: 3 succeeded and 1 failed, published 1, 2, 3 and 5 s late.
    for (at, status, ms) in [
        ("2026-03-05T10:10:00Z", RunStatus::Success, 1000),
        ("2026-03-05T10:20:00Z", RunStatus::Success, 2000),
        ("2026-03-05T10:30:00Z", RunStatus::Success, 3000),
        ("2026-03-05T10:40:00Z", RunStatus::Failed, 5000),
    ] {
        insert_run(&pool, "s1", at, status, Some(ms)).await;
    }
    // s2, the hour ending 6 h ago: 2 skipped; the last hour: 1 cancelled, 1 in flight (at now).
    insert_run(
        &pool,
        "s2",
        "2026-03-05T05:10:00Z",
        RunStatus::Skipped,
        None,
    )
    .await;
    insert_run(
        &pool,
        "s2",
        "2026-03-05T05:40:00Z",
        RunStatus::Skipped,
        None,
    )
    .await;
    insert_run(
        &pool,
        "s2",
        "2026-03-05T11:30:00Z",
        RunStatus::Cancelled,
        None,
    )
    .await;
    insert_run(&pool, "s1", NOW, RunStatus::Enqueued, Some(9000)).await;
    // Not in the day: exactly 24 h ago, older, and ahead of now.
    insert_run(
        &pool,
        "s1",
        "2026-03-04T12:00:00Z",
        RunStatus::Success,
        Some(90_000),
    )
    .await;
    insert_run(
        &pool,
        "s2",
        "2026-03-04T09:00:00Z",
        RunStatus::Failed,
        Some(90_000),
    )
    .await;
    insert_run(
        &pool,
        "s2",
        "2026-03-05T12:00:01Z",
        RunStatus::Success,
        Some(90_000),
    )
    .await;

    let (status, _, answer) = call(
        &api,
        Method::GET,
        "/ui/fragments/schedules",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let page = answer.as_str().expect("html");
    let charts = page.find("id=\"outcomes-chart\"").expect("outcomes chart");
    let drift = page.find("id=\"drift-chart\"").expect("drift chart");
    let table = page.find("<table").expect("table");
    assert!(
        charts < table && drift < table,
        "charts above the table: {page}"
    );
    assert!(
        page.contains("data-success=\"3\" data-failed=\"1\" data-skipped=\"2\" data-cancelled=\"1\" data-other=\"1\""),
        "{page}"
    );
    for (class, ago, n) in [
        ("bar-success", 1, 3),
        ("bar-failed", 1, 1),
        ("bar-skipped", 6, 2),
        ("bar-cancelled", 0, 1),
        ("bar-other", 0, 1),
    ] {
        let rect = format!("<rect class=\"{class}\" data-hours-ago=\"{ago}\" data-n=\"{n}\"");
        assert_eq!(page.matches(&rect).count(), 1, "{rect}: {page}");
        assert_eq!(
            page.matches(&format!("<rect class=\"{class}\"")).count(),
            1,
            "{class}: {page}"
        );
    }
    // Drift: the median and largest of the hour's published runs.
    assert!(
        page.contains("hour ending 1 h ago: median 2500 ms, largest 5000 ms over 4 published"),
        "{page}"
    );
    assert!(
        page.contains("hour ending 0 h ago: median 9000 ms, largest 9000 ms over 1 published"),
        "{page}"
    );
    assert!(page.contains("at most 9000 ms over 5 ticks"), "{page}");
    assert_eq!(page.matches("<circle class=\"dot\"").count(), 2, "{page}");
    assert!(page.contains("Across all schedules"), "{page}");
    assert!(
        page.contains("Computed at <time datetime=\"2026-03-05T12:00:00Z\">"),
        "{page}"
    );

    // The store's totals themselves: only the three hours, nothing at the 24 h boundary.
    let hours = kairos_store::overview::last_day(&pool, ts(NOW))
        .await
        .expect("last day");
    let shape: Vec<(i32, [i64; 6])> = hours
        .iter()
        .map(|h| {
            let counts = [
                h.success,
                h.failed,
                h.skipped,
                h.cancelled,
                h.other,
                h.published,
            ];
            (h.hours_ago, counts)
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            (0, [0, 0, 0, 1, 1, 1]),
            (1, [3, 1, 0, 0, 0, 4]),
            (6, [0, 0, 2, 0, 0, 0]),
        ]
    );
    assert_eq!(
        (hours[1].drift_p50_ms, hours[1].drift_max_ms),
        (Some(2500.0), Some(5000.0))
    );
    assert_eq!((hours[2].drift_p50_ms, hours[2].drift_max_ms), (None, None));

    // Cached: a run added now shows only after the cache expires.
    insert_run(
        &pool,
        "s2",
        "2026-03-05T11:45:00Z",
        RunStatus::Success,
        None,
    )
    .await;
    let (_, _, again) = call(
        &api,
        Method::GET,
        "/ui/fragments/schedules",
        Some(READER),
        None,
    )
    .await;
    assert!(
        again.as_str().expect("html").contains("data-success=\"3\""),
        "cached for 60 s"
    );

    // Drift is the fire drift of planned ticks' first attempts: a backfilled run and a
    // retry are left out, as kairos_fire_drift_seconds leaves them out.
    sqlx::query("update schedule_runs set source = 'backfill' where run_at = $1")
        .bind(ts(NOW))
        .execute(&pool)
        .await
        .expect("backfilled");
    sqlx::query("update schedule_runs set attempt = 2 where run_at = $1")
        .bind(ts("2026-03-05T10:40:00Z"))
        .execute(&pool)
        .await
        .expect("a retry");
    let hours = kairos_store::overview::last_day(&pool, ts(NOW))
        .await
        .expect("last day");
    let drift: Vec<(i32, i64, Option<f64>)> = hours
        .iter()
        .map(|h| (h.hours_ago, h.published, h.drift_max_ms))
        .collect();
    assert!(drift.contains(&(0, 0, None)), "{drift:?}");
    assert!(drift.contains(&(1, 3, Some(3000.0))), "{drift:?}");
}
