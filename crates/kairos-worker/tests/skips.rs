//! Skipping one occurrence, on real PostgreSQL with pinned database clocks: a skipped tick
//! the planner has not planned yet is written `SKIPPED`, one already planned (`PENDING`) is
//! marked `SKIPPED` by the skip, both with the reason `skipped by <who>: <note>`, and their
//! neighbours run. A time that is not a fire time, or that has passed, is refused naming
//! `run_at` (and the nearest fire times), storing nothing. Taking a skip back restores the
//! tick; previews show skipped ticks as skipped.

use crate::planner_support;

use chrono::{DateTime, Utc};
use kairos_core::{RunKey, RunStatus};
use kairos_registrar::{Error, PreviewInput};
use kairos_testkit::{sqlx, TestDb};
use kairos_worker::retention::{Retention, RetentionConfig};
use planner_support::{drain, input, planner, registrar, runs_of, ts, upsert};

/// Each run of `schedule_id` as (tick, status, reason), oldest tick first.
async fn ticks(
    pool: &kairos_store::PgPool,
    schedule_id: &str,
) -> Vec<(DateTime<Utc>, RunStatus, Option<String>)> {
    runs_of(pool, schedule_id)
        .await
        .into_iter()
        .map(|run| (run.run_at, run.status, run.reason))
        .collect()
}

async fn skip_rows(pool: &kairos_store::PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from schedule_skips")
        .fetch_one(pool)
        .await
        .expect("count skips")
}

#[tokio::test]
async fn a_planned_and_an_unplanned_tick_are_skipped_and_their_neighbours_run() {
    let db = TestDb::new().await;
    let pool = db.pool();
    upsert(&pool, "2026-03-09T10:30:00Z", input("hourly", "0 * * * *")).await;
    // The 11:00 tick is planned (lookahead 60 s) before it is skipped.
    drain(&planner(&pool, "2026-03-09T10:59:30Z")).await;
    let skipper = registrar(&pool, "2026-03-09T10:59:40Z");
    let planned = skipper
        .skip("hourly", ts("2026-03-09T11:00:00Z"), Some("freeze"), "ops")
        .await
        .expect("skip the planned tick");
    assert_eq!(planned.reason(), "skipped by ops: freeze");
    skipper
        .skip("hourly", ts("2026-03-09T13:00:00Z"), None, "alice")
        .await
        .expect("skip a tick not planned yet");
    assert_eq!(
        ticks(&pool, "hourly").await,
        vec![(
            ts("2026-03-09T11:00:00Z"),
            RunStatus::Skipped,
            Some("skipped by ops: freeze".into())
        )],
        "the planned run was marked in the skip's transaction"
    );

    for now in [
        "2026-03-09T11:59:30Z",
        "2026-03-09T12:59:30Z",
        "2026-03-09T13:59:30Z",
    ] {
        drain(&planner(&pool, now)).await;
    }
    assert_eq!(
        ticks(&pool, "hourly").await,
        vec![
            (
                ts("2026-03-09T11:00:00Z"),
                RunStatus::Skipped,
                Some("skipped by ops: freeze".into())
            ),
            (ts("2026-03-09T12:00:00Z"), RunStatus::Pending, None),
            (
                ts("2026-03-09T13:00:00Z"),
                RunStatus::Skipped,
                Some("skipped by alice".into())
            ),
            (ts("2026-03-09T14:00:00Z"), RunStatus::Pending, None),
        ],
        "the skipped ticks are SKIPPED with their reason; their neighbours are planned"
    );
    let finished: Option<DateTime<Utc>> =
        sqlx::query_scalar("select finished_at from schedule_runs where idempotency_key = $1")
            .bind(RunKey::tick("hourly", ts("2026-03-09T13:00:00Z")).as_str())
            .fetch_one(&pool)
            .await
            .expect("the skipped run");
    assert_eq!(
        finished,
        Some(ts("2026-03-09T12:59:30Z")),
        "final when written"
    );
    let listed = skipper.skips("hourly").await.expect("list");
    let listed: Vec<_> = listed
        .iter()
        .map(|s| (s.run_at, s.skipped_by.as_str()))
        .collect();
    assert_eq!(
        listed,
        vec![
            (ts("2026-03-09T11:00:00Z"), "ops"),
            (ts("2026-03-09T13:00:00Z"), "alice")
        ]
    );
}

#[tokio::test]
async fn a_time_that_is_not_a_fire_time_or_has_passed_is_refused_naming_run_at() {
    let db = TestDb::new().await;
    let pool = db.pool();
    upsert(&pool, "2026-03-09T10:30:00Z", input("hourly", "0 * * * *")).await;
    let skipper = registrar(&pool, "2026-03-09T10:30:00Z");
    let refused = skipper
        .skip("hourly", ts("2026-03-09T11:20:00Z"), Some("x"), "ops")
        .await;
    let Err(Error::Invalid(problems)) = refused else {
        panic!("not a fire time must be refused: {refused:?}");
    };
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].field, "run_at");
    let rule = problems[0].rule.to_string();
    assert!(
        rule.contains("2026-03-09T11:00:00Z") && rule.contains("2026-03-09T12:00:00Z"),
        "the nearest fire times are named: {rule}"
    );

    let refused = skipper
        .skip("hourly", ts("2026-03-09T10:00:00Z"), None, "ops")
        .await;
    let Err(Error::Invalid(problems)) = refused else {
        panic!("a past tick must be refused: {refused:?}");
    };
    assert_eq!(problems[0].field, "run_at");
    assert!(
        problems[0].rule.contains("not in the future"),
        "{problems:?}"
    );

    let long = "n".repeat(1001);
    let refused = skipper
        .skip("hourly", ts("2026-03-09T11:00:00Z"), Some(&long), "ops")
        .await;
    assert!(
        matches!(&refused, Err(Error::Invalid(p)) if p[0].field == "note"),
        "{refused:?}"
    );
    assert!(matches!(
        skipper
            .skip("nope", ts("2026-03-09T11:00:00Z"), None, "ops")
            .await,
        Err(Error::NotFound { .. })
    ));
    assert_eq!(skip_rows(&pool).await, 0, "nothing stored");

    skipper
        .skip("hourly", ts("2026-03-09T11:00:00Z"), None, "ops")
        .await
        .expect("skip");
    let again = skipper
        .skip("hourly", ts("2026-03-09T11:00:00Z"), Some("again"), "bob")
        .await;
    assert!(matches!(again, Err(Error::Conflict { .. })), "{again:?}");
    assert_eq!(skip_rows(&pool).await, 1);
}

#[tokio::test]
async fn taking_a_skip_back_before_its_tick_restores_the_tick() {
    let db = TestDb::new().await;
    let pool = db.pool();
    upsert(&pool, "2026-03-09T10:30:00Z", input("hourly", "0 * * * *")).await;
    drain(&planner(&pool, "2026-03-09T10:59:30Z")).await;
    let at = registrar(&pool, "2026-03-09T10:59:40Z");
    for tick in ["2026-03-09T11:00:00Z", "2026-03-09T12:00:00Z"] {
        at.skip("hourly", ts(tick), Some("maybe"), "ops")
            .await
            .expect("skip");
    }
    at.unskip("hourly", ts("2026-03-09T11:00:00Z"), "ops")
        .await
        .expect("unskip the planned one");
    at.unskip("hourly", ts("2026-03-09T12:00:00Z"), "ops")
        .await
        .expect("unskip the unplanned one");
    assert!(matches!(
        at.unskip("hourly", ts("2026-03-09T12:00:00Z"), "ops").await,
        Err(Error::NotFound { .. })
    ));
    // The refused unskip above released the schedule's row lock at once: the planner's
    // claim (which skips locked schedules) plans the tick.
    drain(&planner(&pool, "2026-03-09T11:59:30Z")).await;
    assert_eq!(
        ticks(&pool, "hourly").await,
        vec![
            (ts("2026-03-09T11:00:00Z"), RunStatus::Pending, None),
            (ts("2026-03-09T12:00:00Z"), RunStatus::Pending, None),
        ],
        "the marked run is PENDING again and the other tick is planned"
    );
    assert_eq!(skip_rows(&pool).await, 0);

    // A skip of a tick that has passed is the record of why it did not run: it stays.
    at.skip("hourly", ts("2026-03-09T13:00:00Z"), None, "ops")
        .await
        .expect("skip");
    let later = registrar(&pool, "2026-03-09T13:00:01Z");
    let refused = later
        .unskip("hourly", ts("2026-03-09T13:00:00Z"), "ops")
        .await;
    assert!(
        matches!(&refused, Err(Error::Invalid(p)) if p[0].field == "run_at"),
        "{refused:?}"
    );
    assert_eq!(skip_rows(&pool).await, 1, "the past skip is kept");
}

#[tokio::test]
async fn a_skip_while_paused_outlasts_the_resume_and_a_skip_taken_back_while_paused_waits_for_it() {
    let db = TestDb::new().await;
    let pool = db.pool();
    upsert(&pool, "2026-03-09T10:30:00Z", input("hourly", "0 * * * *")).await;
    drain(&planner(&pool, "2026-03-09T10:59:30Z")).await;
    let at = registrar(&pool, "2026-03-09T10:59:35Z");
    at.set_paused("hourly", true).await.expect("pause");
    at.skip("hourly", ts("2026-03-09T11:00:00Z"), Some("x"), "ops")
        .await
        .expect("skip the run the pause cancelled");
    at.set_paused("hourly", false).await.expect("resume");
    assert_eq!(
        ticks(&pool, "hourly").await,
        vec![(
            ts("2026-03-09T11:00:00Z"),
            RunStatus::Skipped,
            Some("skipped by ops: x".into())
        )],
        "the resume does not bring a skipped tick back"
    );
    at.set_paused("hourly", true).await.expect("pause again");
    at.unskip("hourly", ts("2026-03-09T11:00:00Z"), "ops")
        .await
        .expect("unskip");
    assert_eq!(
        ticks(&pool, "hourly").await[0].1,
        RunStatus::Cancelled,
        "taken back while paused: cancelled as paused, not launched"
    );
    at.set_paused("hourly", false).await.expect("resume");
    assert_eq!(ticks(&pool, "hourly").await[0].1, RunStatus::Pending);
}

#[tokio::test]
async fn previews_show_skipped_ticks_as_skipped() {
    let db = TestDb::new().await;
    let pool = db.pool();
    upsert(&pool, "2026-03-09T10:30:00Z", input("hourly", "0 * * * *")).await;
    let at = registrar(&pool, "2026-03-09T10:30:00Z");
    at.skip("hourly", ts("2026-03-09T12:00:00Z"), Some("freeze"), "ops")
        .await
        .expect("skip");

    let view = at.get("hourly").await.expect("get");
    assert_eq!(view.preview[1], ts("2026-03-09T12:00:00Z"), "still listed");
    let skipped: Vec<_> = view.skips.iter().map(|s| s.run_at).collect();
    assert_eq!(skipped, vec![ts("2026-03-09T12:00:00Z")]);

    let detail = at.schedule_detail("hourly", 5).await.expect("detail");
    let marks: Vec<Option<String>> = detail
        .upcoming
        .iter()
        .map(|tick| tick.skip.as_ref().map(kairos_core::Skip::reason))
        .collect();
    assert_eq!(
        marks,
        vec![
            None,
            Some("skipped by ops: freeze".into()),
            None,
            None,
            None
        ]
    );

    let preview = at
        .preview_explained(&PreviewInput {
            cron_expr: "0 * * * *".into(),
            timezone: "UTC".into(),
            schedule_id: Some("hourly".into()),
            ..PreviewInput::default()
        })
        .await
        .expect("preview");
    let skipped: Vec<_> = preview.skips.iter().map(|s| s.run_at).collect();
    assert_eq!(skipped, vec![ts("2026-03-09T12:00:00Z")]);
}

#[tokio::test]
async fn retention_removes_skips_of_old_ticks() {
    let db = TestDb::new().await;
    let pool = db.pool();
    upsert(&pool, "2026-03-09T10:30:00Z", input("hourly", "0 * * * *")).await;
    let at = registrar(&pool, "2026-03-09T10:30:00Z");
    for tick in ["2026-03-09T11:00:00Z", "2026-04-20T11:00:00Z"] {
        at.skip("hourly", ts(tick), None, "ops")
            .await
            .expect("skip");
    }
    // A retention pass 40 days on (period 30 days): the skip of the tick older than the
    // period goes, the other stays.
    let retention = Retention::new(
        pool.clone(),
        RetentionConfig {
            retention: chrono::Duration::days(30),
            audit_retention: chrono::Duration::days(365),
            keep_last: 0,
            batch_size: 100,
            max_batches: 1,
            batch_pause: std::time::Duration::ZERO,
            interval: std::time::Duration::from_secs(3600),
            partition_days_ahead: 1,
            pinned_now: Some(ts("2026-04-18T00:00:00Z")),
        },
    );
    retention.pass().await.expect("retention pass");
    let left: Vec<DateTime<Utc>> = at
        .skips("hourly")
        .await
        .expect("list")
        .iter()
        .map(|s| s.run_at)
        .collect();
    assert_eq!(left, vec![ts("2026-04-20T11:00:00Z")]);
}
