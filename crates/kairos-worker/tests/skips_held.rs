//! A skip of a tick whose run a pre-staged dispatcher round holds: the skip never waits for
//! the round (it answers while the round still holds the run, leaving the run as it is and
//! moving the schedule's revision), and the round, restaging the run before its tick, finds
//! the skip and marks the run `SKIPPED` with the skip's reason instead of publishing it. Its
//! neighbour, held by the same round, goes out. On real PostgreSQL and nats-server.

use crate::dispatcher_support;

use std::time::Duration;

use chrono::{DateTime, Utc};
use dispatcher_support::{config, field, key, nats, run, statuses, until};
use kairos_core::RunStatus;
use kairos_registrar::{Registrar, ScheduleInput, Settings};
use kairos_store::PgPool;
use kairos_testkit::{sqlx, TestDb};
use kairos_worker::dispatcher::Dispatcher;

/// Which of `keys` no open transaction holds locked (read from `xmax`, taking no lock).
async fn unlocked(pool: &PgPool, keys: &[String]) -> Vec<String> {
    sqlx::query_scalar(
        "select idempotency_key from schedule_runs where idempotency_key = any($1) \
           and (xmax::text::bigint = 0 \
                or txid_status(xmax::text::bigint) is distinct from 'in progress')",
    )
    .bind(keys)
    .fetch_all(pool)
    .await
    .expect("probe")
}

#[tokio::test]
async fn a_round_holding_a_skipped_tick_marks_it_skipped_instead_of_publishing_it() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    let registrar = Registrar::new(pool.clone(), Settings::default());
    for id in ["skipped", "neighbour"] {
        let every_second = ScheduleInput {
            schedule_id: Some(id.into()),
            workflow_id: "wf".into(),
            version: 1,
            user_id: "u".into(),
            cron_expr: "* * * * * *".into(),
            timezone: "UTC".into(),
            ..ScheduleInput::default()
        };
        registrar.upsert(&every_second).await.expect("upsert");
    }
    let keys = [key(1), key(2)];
    run(&pool, &keys[0], "skipped", 6.0).await;
    run(&pool, &keys[1], "neighbour", 6.0).await;
    let run_at: DateTime<Utc> =
        sqlx::query_scalar("select run_at from schedule_runs where idempotency_key = $1")
            .bind(&keys[0])
            .fetch_one(&pool)
            .await
            .expect("the tick");
    let mut config = config();
    config.prestage = Duration::from_secs(12);
    let dispatcher = Dispatcher::new(pool.clone(), launcher, config);
    let round = tokio::spawn(async move { dispatcher.round().await.expect("round") });
    until(
        Duration::from_secs(5),
        "the round to hold the runs",
        || async { unlocked(&pool, &keys).await.is_empty() },
    )
    .await;

    registrar
        .skip("skipped", run_at, Some("vendor down"), "ops")
        .await
        .expect("the skip answers while the round holds the run");
    assert!(
        unlocked(&pool, &keys).await.is_empty(),
        "the skip answered while the round still held the runs"
    );
    assert_eq!(statuses(&pool).await[&keys[0]], RunStatus::Pending);

    let round = round.await.expect("join");
    assert_eq!((round.withdrawn, round.enqueued), (1, 1), "{round:?}");
    let runs = statuses(&pool).await;
    assert_eq!(runs[&keys[0]], RunStatus::Skipped);
    assert_eq!(
        field(&pool, &keys[0], "reason").await.as_deref(),
        Some("skipped by ops: vendor down")
    );
    assert_eq!(field(&pool, &keys[0], "published_at").await, None);
    assert_eq!(
        runs[&keys[1]],
        RunStatus::Enqueued,
        "the neighbour went out"
    );
}
