//! What a pre-staged dispatcher round holds, and for how long. Each wave is committed before
//! the round waits for the next, so a published run is reportable at once. A schedule write
//! never waits for a round that holds the schedule's pre-staged runs: it answers while the
//! round still holds them, and the round brings each one in line with the schedule as
//! written before it publishes (cancelled when the schedule was paused, deleted or
//! rescheduled away from the tick; kept, with the new jitter's `fire_at`, when the tick is
//! still a tick). On real PostgreSQL and nats-server.

use crate::dispatcher_support;

use std::time::Duration;

use dispatcher_support::{config, field, key, nats, run, statuses, until, workflow};
use kairos_core::{jitter_offset, RunKey, RunStatus};
use kairos_launcher::NatsLauncher;
use kairos_registrar::{Registrar, ScheduleInput, Settings};
use kairos_store::PgPool;
use kairos_testkit::{sqlx, TestDb};
use kairos_worker::dispatcher::{Dispatcher, Round};

fn every_second(id: &str) -> ScheduleInput {
    ScheduleInput {
        schedule_id: Some(id.into()),
        workflow_id: "wf".into(),
        version: 1,
        user_id: "u".into(),
        cron_expr: "* * * * * *".into(),
        timezone: "UTC".into(),
        ..ScheduleInput::default()
    }
}

/// Which of `keys` no open transaction holds locked now. Read from each row's `xmax` (the
/// locker's transaction, still in progress), so the probe takes no lock of its own and never
/// makes the round's `skip locked` claim pass a run by.
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

/// One dispatcher round with a 12 s pre-staging lead, running in the background: it claims
/// the runs due within the lead and holds them until their tick.
fn prestaged_round(pool: &PgPool, launcher: NatsLauncher) -> tokio::task::JoinHandle<Round> {
    let mut config = config();
    config.prestage = Duration::from_secs(12);
    let dispatcher = Dispatcher::new(pool.clone(), launcher, config);
    tokio::spawn(async move { dispatcher.round().await.expect("round") })
}

#[tokio::test]
async fn writes_answer_while_a_round_holds_their_runs_and_the_round_restages_them() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    let registrar = Registrar::new(pool.clone(), Settings::default());
    for id in ["paused", "deleted", "moved", "jittered", "untouched"] {
        registrar.upsert(&every_second(id)).await.expect("upsert");
    }
    let keys: Vec<String> = (1..=5).map(key).collect();
    for (key, id) in keys
        .iter()
        .zip(["paused", "deleted", "moved", "jittered", "untouched"])
    {
        run(&pool, key, id, 6.0).await;
    }
    // A round pre-stages the five runs (lead 12 s) and holds them until their tick, 6 s on.
    let round = prestaged_round(&pool, launcher);
    until(
        Duration::from_secs(5),
        "the round to hold the runs",
        || async { unlocked(&pool, &keys).await.is_empty() },
    )
    .await;

    registrar.set_paused("paused", true).await.expect("pause");
    registrar.delete("deleted").await.expect("delete");
    let mut moved = every_second("moved");
    moved.cron_expr = "0 0 1 1 *".into();
    registrar.upsert(&moved).await.expect("reschedule");
    let mut jittered = every_second("jittered");
    jittered.jitter_ms = Some(900);
    registrar.upsert(&jittered).await.expect("new jitter");
    assert!(
        unlocked(&pool, &keys).await.is_empty(),
        "every write answered while the round still held the runs"
    );
    assert!(
        statuses(&pool)
            .await
            .values()
            .all(|s| *s == RunStatus::Pending),
        "the writes left the held runs to the round"
    );

    let round = round.await.expect("join");
    assert_eq!((round.withdrawn, round.enqueued), (3, 2), "{round:?}");
    assert_eq!(
        kairos_store::dispatch::waves::open_count(&pool)
            .await
            .expect("waves"),
        0,
        "every row naming the round's waves is closed, those written ahead included"
    );
    let runs = statuses(&pool).await;
    let reason = |n: usize| field(&pool, keys[n].as_str(), "reason");
    assert_eq!(runs[&keys[0]], RunStatus::Cancelled);
    assert_eq!(reason(0).await.as_deref(), Some("paused"));
    assert_eq!(runs[&keys[1]], RunStatus::Cancelled);
    assert_eq!(reason(1).await.as_deref(), Some("schedule deleted"));
    assert_eq!(runs[&keys[2]], RunStatus::Cancelled);
    assert_eq!(
        reason(2).await.as_deref(),
        Some("rescheduled: no longer a tick of the schedule")
    );
    assert_eq!(runs[&keys[3]], RunStatus::Enqueued);
    assert_eq!(runs[&keys[4]], RunStatus::Enqueued);

    // The kept run went out at the new jitter's fire_at, carrying the schedule's revision.
    let (run_at, fire_at, published_at, revision): (
        chrono::DateTime<chrono::Utc>,
        chrono::DateTime<chrono::Utc>,
        chrono::DateTime<chrono::Utc>,
        Option<i64>,
    ) = sqlx::query_as(
        "select run_at, fire_at, published_at, revision from schedule_runs \
         where idempotency_key = $1",
    )
    .bind(&keys[3])
    .fetch_one(&pool)
    .await
    .expect("the kept run");
    let tick = RunKey::tick("jittered", run_at);
    assert_eq!(fire_at, run_at + jitter_offset(&tick, 900));
    assert!(published_at >= fire_at, "{published_at} before {fire_at}");
    let schedule_revision: i64 =
        sqlx::query_scalar("select revision from schedules where schedule_id = 'jittered'")
            .fetch_one(&pool)
            .await
            .expect("revision");
    assert_eq!(revision, Some(schedule_revision));
}

#[tokio::test]
async fn each_wave_is_committed_before_the_round_waits_for_the_next() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    dispatcher_support::schedule(&pool, "s", "allow", None).await;
    let (first, later) = (key(1), key(2));
    run(&pool, &first, "s", 1.0).await;
    run(&pool, &later, "s", 8.0).await;
    let round = prestaged_round(&pool, launcher);
    until(
        Duration::from_secs(6),
        "the first wave to commit",
        || async { statuses(&pool).await[&first] == RunStatus::Enqueued },
    )
    .await;
    // Between the first wave's commit and the next transaction's relock the later run is
    // briefly free; once relocked it stays held until its own wave.
    let keys = [first.clone(), later.clone()];
    until(
        Duration::from_secs(2),
        "the first wave committed (its run free to report on) and the later run held again",
        || async { unlocked(&pool, &keys).await == vec![first.clone()] },
    )
    .await;
    assert_eq!(statuses(&pool).await[&later], RunStatus::Pending);
    let round = round.await.expect("join");
    assert_eq!((round.claimed, round.enqueued), (2, 2), "{round:?}");
}

#[tokio::test]
async fn a_run_a_write_skipped_is_restaged_by_the_round_that_claims_it_later() {
    let db = TestDb::new().await;
    db.store_workflow("wf", 1).await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    let registrar = Registrar::new(pool.clone(), Settings::default());
    registrar
        .upsert(&every_second("paused"))
        .await
        .expect("upsert");
    let held = key(1);
    run(&pool, &held, "paused", -0.5).await;
    // Another transaction holds the run (a round that then fails) while the schedule is
    // paused: the pause skips it.
    let mut elsewhere = pool.begin().await.expect("begin");
    sqlx::query("select 1 from schedule_runs where idempotency_key = $1 for update")
        .bind(&held)
        .execute(&mut *elsewhere)
        .await
        .expect("hold the run");
    registrar.set_paused("paused", true).await.expect("pause");
    elsewhere.rollback().await.expect("the holder gives up");
    assert_eq!(statuses(&pool).await[&held], RunStatus::Pending);

    let dispatcher = Dispatcher::new(pool.clone(), launcher, config());
    let round = dispatcher.round().await.expect("round");
    assert_eq!((round.withdrawn, round.enqueued), (1, 0), "{round:?}");
    assert_eq!(statuses(&pool).await[&held], RunStatus::Cancelled);
    assert_eq!(
        field(&pool, &held, "reason").await.as_deref(),
        Some("paused")
    );
}
