//! Trigger and backfill with an overlap override, on real PostgreSQL and nats-server: a
//! backfill under a `skip` schedule runs every tick, one after another, in tick order
//! (backfill defaults to `queue`); a trigger can override the schedule's policy and works
//! while the schedule is paused.

use crate::dispatcher_support;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use dispatcher_support::{config, nats, spawn_dispatcher, stream_ids, sweeper, until, workflow};
use kairos_core::{Run, RunSource, RunStatus};
use kairos_registrar::{Registrar, ScheduleInput, Settings};
use kairos_store::{runs, PgPool};
use kairos_testkit::TestDb;
use kairos_worker::dispatcher::Dispatcher;
use kairos_worker::intake::{parse_report, Intake};
use serde_json::json;

async fn succeed(intake: &Intake, key: &str) {
    for status in ["STARTED", "SUCCESS"] {
        let report =
            parse_report(key, &json!({"status": status, "executor_id": "e1"})).expect("report");
        intake.report(key, &report).await.expect("recorded");
    }
}

async fn of_source(pool: &PgPool, source: RunSource) -> Vec<Run> {
    let mut all = runs::list_for_schedule(pool, "s1", None, None, 100)
        .await
        .expect("runs");
    all.retain(|run| run.source == source);
    all.sort_by_key(|run| run.run_at);
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_under_skip_runs_every_tick_in_order_and_triggers_override_the_policy() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    let registrar = Registrar::new(pool.clone(), Settings::default());
    let input = ScheduleInput {
        schedule_id: Some("s1".into()),
        workflow_id: "wf".into(),
        version: 1,
        user_id: "u".into(),
        cron_expr: "* * * * *".into(),
        timezone: "UTC".into(),
        overlap_policy: Some("skip".into()),
        ..ScheduleInput::default()
    };
    registrar.upsert(&input).await.expect("upsert");
    let dispatcher = Arc::new(Dispatcher::new(pool.clone(), launcher.clone(), config()));
    let looping = spawn_dispatcher(dispatcher, sweeper(&pool, &launcher));
    let intake = Intake::new(pool.clone());

    let now = Utc::now();
    let done = registrar
        .backfill("s1", now - chrono::Duration::minutes(5), now, None)
        .await
        .expect("backfill");
    assert!(done.ticks >= 5, "{done:?}");
    let ticks = done.ticks as usize;
    // The first tick runs; the others queue behind it. Each success releases the next.
    for n in 0..ticks {
        until(
            Duration::from_secs(10),
            "the next backfilled tick runs",
            || async {
                of_source(&pool, RunSource::Backfill).await[n].status == RunStatus::Enqueued
            },
        )
        .await;
        let backfilled = of_source(&pool, RunSource::Backfill).await;
        if n == 0 {
            // A trigger with `allow` runs beside the run in flight; one without would only
            // be skipped, so it is refused and writes nothing.
            let free = registrar
                .trigger("s1", "free", Some("allow"))
                .await
                .expect("trigger allow");
            let refused = registrar.trigger("s1", "blocked", None).await;
            assert!(
                matches!(&refused, Err(kairos_registrar::Error::Conflict { detail })
                    if detail.contains("would be skipped")),
                "{refused:?}"
            );
            for (run, expected) in [(&free.run, RunStatus::Enqueued)] {
                until(
                    Duration::from_secs(10),
                    "the trigger is decided",
                    || async {
                        runs::get(&pool, &run.idempotency_key)
                            .await
                            .expect("read")
                            .is_some_and(|r| r.status == expected)
                    },
                )
                .await;
            }
            // Any run in flight holds an exclusive schedule: the allowed one ends too.
            succeed(&intake, &free.run.idempotency_key).await;
        }
        // The later ticks of the wave are queued once the tick they wait for is published:
        // their queue stands only if it really went out.
        until(Duration::from_secs(10), "later ticks wait", || async {
            of_source(&pool, RunSource::Backfill).await[n + 1..]
                .iter()
                .all(|run| run.status == RunStatus::Queued)
        })
        .await;
        succeed(&intake, &backfilled[n].idempotency_key).await;
    }
    let keys: Vec<String> = of_source(&pool, RunSource::Backfill)
        .await
        .into_iter()
        .map(|run| run.idempotency_key)
        .collect();
    let launched: Vec<String> = stream_ids(&launcher)
        .await
        .into_iter()
        .filter(|id| keys.contains(id))
        .collect();
    assert_eq!(launched, keys, "every backfilled tick, once, in tick order");

    // Paused: a trigger still creates and launches its run.
    registrar.set_paused("s1", true).await.expect("pause");
    let paused = registrar
        .trigger("s1", "while-paused", None)
        .await
        .expect("trigger while paused");
    until(
        Duration::from_secs(10),
        "the paused schedule's trigger runs",
        || async {
            runs::get(&pool, &paused.run.idempotency_key)
                .await
                .expect("read")
                .is_some_and(|r| r.status == RunStatus::Enqueued)
        },
    )
    .await;
    looping.end().await;

    let bad = registrar.trigger("s1", "bad", Some("sometimes")).await;
    assert!(
        matches!(bad, Err(kairos_registrar::Error::Invalid(ref p)) if p[0].field == "overlap_policy"),
        "{bad:?}"
    );
}
