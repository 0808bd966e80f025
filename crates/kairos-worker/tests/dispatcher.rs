//! The dispatcher on real PostgreSQL and a real nats-server: racing instances, a process
//! killed before its wave's commit, between it and the publishes, and between the PubAcks
//! and the wave's acknowledgement, a broker outage, each overlap policy,
//! `max_run_seconds`, the launch deadline and permanent launch errors.

use crate::dispatcher_support;

use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use std::collections::{HashMap, HashSet};
use std::process::Command;
use std::time::Duration;

use dispatcher_support::{
    allow_runs_due, config, drain, field, key, launcher, nats, run, schedule, statuses, stream_ids,
    until, workflow,
};
use kairos_core::{Reported, RunStatus};
use kairos_store::PgPool;
use kairos_worker::dispatcher::Dispatcher;
use kairos_worker::sweep::{SweepConfig, Sweeper};

/// Rounds until no run is left to publish. Right after a child process died, PostgreSQL may
/// not have ended its session yet, so its row locks can still make a round skip those runs
/// (`skip locked`): keep going until none is `PENDING` or `RETRYING` (bounded).
async fn drain_after_crash<L: kairos_launcher::RunLauncher>(
    dispatcher: &Dispatcher<L>,
    pool: &PgPool,
) {
    until(
        Duration::from_secs(10),
        "the dead child's claims are released",
        || async {
            drain(dispatcher).await;
            statuses(pool)
                .await
                .values()
                .all(|s| !matches!(s, RunStatus::Pending | RunStatus::Retrying))
        },
    )
    .await;
}

async fn report(pool: &PgPool, key: &str, status: Reported) {
    dispatcher_support::report(pool, key, status, "exec-1").await;
}

/// `instances` dispatchers, each with its own NATS connection, drain 200 `allow` runs and
/// 20 `skip` schedules of 5 overdue runs each, concurrently.
async fn race(pool: PgPool, instances: usize) {
    let (server, first) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "free", "allow", None).await;
    for n in 0..200 {
        run(&pool, &key(n), "free", -1.0 - n as f64 / 1000.0).await;
    }
    for s in 0..20u64 {
        let id = format!("excl-{s}");
        schedule(&pool, &id, "skip", None).await;
        for n in 0..5 {
            run(
                &pool,
                &key(10_000 + s * 10 + n),
                &id,
                -2.0 + n as f64 / 10.0,
            )
            .await;
        }
    }
    let mut dispatchers = Vec::new();
    for _ in 0..instances {
        let launcher = launcher(&server).await;
        dispatchers.push(Dispatcher::new(pool.clone(), launcher, config()));
    }
    futures_join(dispatchers.iter().map(drain)).await;

    let runs = statuses(&pool).await;
    let enqueued: HashSet<String> = runs
        .iter()
        .filter(|(_, status)| **status == RunStatus::Enqueued)
        .map(|(key, _)| key.clone())
        .collect();
    assert_eq!(
        enqueued.len(),
        200 + 20,
        "every allow run and one run per skip schedule"
    );
    assert_eq!(
        runs.values().filter(|s| **s == RunStatus::Skipped).count(),
        80
    );
    let ids = stream_ids(&first).await;
    assert_eq!(ids.len(), 220, "exactly one message per launched run");
    assert_eq!(ids.into_iter().collect::<HashSet<_>>(), enqueued);
}

async fn futures_join<F: std::future::Future>(futures: impl Iterator<Item = F>) {
    let handles: Vec<_> = futures.collect();
    let mut pinned: Vec<_> = handles.into_iter().map(Box::pin).collect();
    // Poll all concurrently on this task.
    std::future::poll_fn(|cx| {
        pinned.retain_mut(|f| f.as_mut().poll(cx).is_pending());
        if pinned.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
}

#[tokio::test]
async fn two_dispatchers_publish_every_run_exactly_once() {
    let db = TestDb::new().await;
    let pool = db.pool();
    race(pool, 2).await;
}

#[tokio::test]
async fn three_dispatchers_publish_every_run_exactly_once() {
    let db = TestDb::new().await;
    let pool = db.pool();
    race(pool, 3).await;
}

/// The child of the kill tests: one round that aborts at the crash point `KAIROS_CRASH_AT`
/// names (`dispatcher_before_publish`: the wave is committed `ENQUEUED`, nothing is
/// published; `dispatcher_after_ack`: every PubAck is in, the wave is not acknowledged).
#[tokio::test]
#[ignore = "run by the kill tests below"]
async fn child_round_that_crashes() {
    let (Ok(db), Ok(nats_url)) = (
        std::env::var("KAIROS_TEST_DB_URL"),
        std::env::var("KAIROS_TEST_NATS_URL"),
    ) else {
        return;
    };
    let pool = PgPool::connect(&db).await.expect("child connects");
    let config = kairos_launcher::NatsConfig::new(nats_url);
    let launcher = kairos_launcher::NatsLauncher::connect(config)
        .await
        .expect("nats");
    let lead_ms = std::env::var("KAIROS_TEST_PRESTAGE_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .unwrap_or(0);
    let _ = Dispatcher::new(pool, launcher, dispatcher_support::prestaged(lead_ms))
        .round()
        .await;
    panic!("the crash point was not reached");
}

/// Runs [`child_round_that_crashes`] against `db`'s database and `nats_url`, dying at
/// `point`.
fn crash_child(db: &TestDb, nats_url: &str, point: &str) {
    crash_prestaged_child(db, nats_url, point, 0);
}

/// [`crash_child`] with a pre-staging lead of `lead_ms`.
fn crash_prestaged_child(db: &TestDb, nats_url: &str, point: &str, lead_ms: u64) {
    let status = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            test_name!("child_round_that_crashes"),
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("KAIROS_CRASH_AT", point)
        .env("KAIROS_TEST_PRESTAGE_MS", lead_ms.to_string())
        .env("KAIROS_TEST_DB_URL", db.url())
        .env("KAIROS_TEST_NATS_URL", nats_url)
        .status()
        .expect("spawn child");
    assert!(!status.success(), "the child must die at the crash point");
}

/// A sweeper that takes a wave as unacknowledged at once.
fn eager_sweeper(
    pool: &PgPool,
    launcher: &kairos_launcher::NatsLauncher,
) -> Sweeper<kairos_launcher::NatsLauncher> {
    Sweeper::new(
        pool.clone(),
        launcher.clone(),
        SweepConfig {
            unacknowledged_after: Duration::ZERO,
            ..dispatcher_support::sweep_config()
        },
    )
}

/// A dispatcher killed after it committed a wave `ENQUEUED` and before publishing it, or
/// after every PubAck and before acknowledging the wave, loses and doubles nothing: the
/// wave's row names its runs, and the sweep publishes them again under the same ids (the
/// stream drops those already stored).
async fn killed_after_the_commit(point: &str, published_by_the_child: usize) {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (server, launcher) = nats().await;
    let keys = allow_runs_due(&pool, 50).await;
    crash_child(&db, &server.url(), point);
    assert_eq!(
        stream_ids(&launcher).await.len(),
        published_by_the_child,
        "what the child published before it died"
    );
    assert!(
        statuses(&pool)
            .await
            .values()
            .all(|s| *s == RunStatus::Enqueued),
        "the wave was committed before its publishes"
    );
    assert_eq!(
        kairos_store::dispatch::waves::open_count(&pool)
            .await
            .expect("waves"),
        1,
        "the wave is not acknowledged"
    );
    the_sweep_publishes_each_once(&pool, &launcher, &keys).await;
}

/// After a dispatcher died with a wave committed: one sweep publishes every run of `keys`
/// again and closes the wave, and the stream holds each run once.
async fn the_sweep_publishes_each_once(
    pool: &PgPool,
    launcher: &kairos_launcher::NatsLauncher,
    keys: &[String],
) {
    eager_sweeper(pool, launcher).sweep().await.expect("sweep");
    assert_eq!(
        kairos_store::dispatch::waves::open_count(pool)
            .await
            .expect("waves"),
        0,
        "the sweep closed the wave"
    );
    let ids = stream_ids(launcher).await;
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), keys.len(), "every run published");
    assert_eq!(ids.len(), keys.len(), "none twice: duplicates dropped");
    assert!(keys.iter().all(|key| unique.contains(key)));
}

#[tokio::test]
async fn killed_between_commit_and_publish_loses_and_doubles_nothing() {
    killed_after_the_commit("dispatcher_before_publish", 0).await;
}

#[tokio::test]
async fn killed_between_ack_and_acknowledgement_loses_and_doubles_nothing() {
    killed_after_the_commit("dispatcher_after_ack", 50).await;
}

/// One run each of `n` `allow` schedules, all due at one instant `ahead_s` seconds from now
/// (a round records such runs ahead of their tick: each is alone of its schedule). Returns
/// their keys.
async fn allow_runs_due_together(pool: &PgPool, n: usize, ahead_s: f64) -> Vec<String> {
    workflow(pool).await;
    let keys: Vec<String> = (0..n as u64).map(key).collect();
    let schedules: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
    for id in &schedules {
        schedule(pool, id, "allow", None).await;
    }
    sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, \
           workflow_id, version, user_id) \
         select k, s, date_trunc('second', t), t, 'wf', 1, 'u' \
         from unnest($1::text[], $3::text[]) as v(k, s), \
           (select now() + make_interval(secs => $2) as t) as due",
    )
    .bind(&keys)
    .bind(ahead_s)
    .bind(&schedules)
    .execute(pool)
    .await
    .expect("insert runs");
    keys
}

/// A dispatcher killed after it committed a pre-staged wave (recorded `ENQUEUED` and named
/// in `launch_waves` ahead of the tick), before publishing it or before acknowledging it,
/// loses and doubles nothing; the wave's row counts from its tick, not from when it was
/// written, so the sweeper's grace starts at the publishes.
async fn killed_after_a_prestaged_commit(point: &str, published_by_the_child: usize) {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (server, launcher) = nats().await;
    let keys = allow_runs_due_together(&pool, 50, 1.5).await;
    crash_prestaged_child(&db, &server.url(), point, 3000);
    assert_eq!(stream_ids(&launcher).await.len(), published_by_the_child);
    assert!(
        statuses(&pool)
            .await
            .values()
            .all(|s| *s == RunStatus::Enqueued),
        "the wave was committed before its publishes"
    );
    let (waves, from_tick): (i64, bool) = sqlx::query_as(
        "select count(*), bool_and(w.recorded_at >= (select max(fire_at) from schedule_runs)) \
         from launch_waves w",
    )
    .fetch_one(&pool)
    .await
    .expect("waves");
    assert_eq!(waves, 1, "one row names the runs recorded ahead");
    assert!(from_tick, "the row counts from the wave's tick");
    the_sweep_publishes_each_once(&pool, &launcher, &keys).await;
}

#[tokio::test]
async fn killed_between_a_prestaged_commit_and_publish_loses_and_doubles_nothing() {
    killed_after_a_prestaged_commit("dispatcher_before_publish", 0).await;
}

#[tokio::test]
async fn killed_between_prestaged_acks_and_acknowledgement_loses_and_doubles_nothing() {
    killed_after_a_prestaged_commit("dispatcher_after_ack", 50).await;
}

/// A kairos instance killed while it publishes a retry (between the PubAck of attempt 2 and
/// the wave's acknowledgement) loses no attempt and doubles none: the run is `ENQUEUED` in
/// attempt 2, the sweep publishes attempt 2 again under the same `Nats-Msg-Id` (`key:2`),
/// and the stream keeps one copy.
#[tokio::test]
async fn killed_while_publishing_a_retry_loses_and_doubles_no_attempt() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "s", "skip", None).await;
    sqlx::query("update schedules set max_attempts = 3 where schedule_id = 's'")
        .execute(&pool)
        .await
        .expect("retry policy");
    let k = key(1);
    run(&pool, &k, "s", -0.1).await;
    let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), config());
    let _ = drain(&dispatcher).await;
    let intake = kairos_worker::intake::Intake::new(pool.clone());
    let failed = kairos_worker::intake::parse_report(&k, &serde_json::json!({"status": "FAILED"}))
        .expect("report");
    intake.report(&k, &failed).await.expect("attempt 1 failed");
    assert_eq!(statuses(&pool).await[&k], RunStatus::Retrying);

    crash_child(&db, &server.url(), "dispatcher_after_ack");
    assert_eq!(
        stream_ids(&launcher).await,
        vec![k.clone(), format!("{k}:2")]
    );
    assert_eq!(statuses(&pool).await[&k], RunStatus::Enqueued);
    assert_eq!(field(&pool, &k, "attempt").await.as_deref(), Some("2"));
    eager_sweeper(&pool, &launcher)
        .sweep()
        .await
        .expect("sweep");
    drain_after_crash(&dispatcher, &pool).await;
    assert_eq!(statuses(&pool).await[&k], RunStatus::Enqueued);
    assert_eq!(
        stream_ids(&launcher).await,
        vec![k.clone(), format!("{k}:2")],
        "attempt 2 once: the re-publish was a duplicate"
    );
}

/// A dispatcher killed before its wave's commit rolls the wave back: nothing was
/// published, the runs are `PENDING` again, and the next dispatcher publishes each once.
#[tokio::test]
async fn killed_before_the_commit_leaves_the_runs_pending() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (server, launcher) = nats().await;
    let keys = allow_runs_due(&pool, 20).await;
    crash_child(&db, &server.url(), "dispatcher_before_commit");
    assert!(stream_ids(&launcher).await.is_empty(), "nothing published");
    let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), config());
    drain_after_crash(&dispatcher, &pool).await;
    assert!(statuses(&pool)
        .await
        .values()
        .all(|s| *s == RunStatus::Enqueued));
    assert_eq!(
        stream_ids(&launcher).await,
        keys,
        "once each, in fire_at order"
    );
    assert_eq!(
        kairos_store::dispatch::waves::open_count(&pool)
            .await
            .expect("waves"),
        0
    );
}

#[tokio::test]
async fn nats_outage_loses_nothing_and_keeps_fire_at_order() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (mut server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "s", "allow", None).await;
    let keys: Vec<String> = (0..30).map(key).collect();
    for (n, key) in keys.iter().enumerate() {
        run(&pool, key, "s", -30.0 + n as f64).await;
    }
    server.stop();
    let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), config());
    let round = dispatcher.round().await.expect("round while nats is down");
    assert_eq!((round.retry, round.enqueued), (30, 0));
    assert!(statuses(&pool)
        .await
        .values()
        .all(|s| *s == RunStatus::Pending));
    assert_eq!(
        field(&pool, &keys[0], "attempts").await.as_deref(),
        Some("1")
    );
    assert!(field(&pool, &keys[0], "last_error").await.is_some());

    server.restart();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let looping = tokio::spawn({
        let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), config());
        async move { dispatcher.run(async { stopped.await.unwrap_or(()) }).await }
    });
    dispatcher_support::until(Duration::from_secs(20), "all runs enqueued", || async {
        statuses(&pool)
            .await
            .values()
            .all(|s| *s == RunStatus::Enqueued)
    })
    .await;
    stop.send(()).expect("loop alive");
    looping.await.expect("join").expect("loop ends cleanly");
    let ids = stream_ids(&launcher).await;
    assert_eq!(
        ids, keys,
        "nothing lost, nothing doubled, fire_at order kept"
    );
}

#[tokio::test]
async fn overlap_allow_and_skip() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "free", "allow", None).await;
    schedule(&pool, "skipper", "skip", None).await;
    let dispatcher = Dispatcher::new(pool.clone(), launcher, config());
    run(&pool, &key(1), "free", -1.0).await;
    run(&pool, &key(2), "skipper", -1.0).await;
    let _ = drain(&dispatcher).await;
    run(&pool, &key(3), "free", -0.5).await;
    run(&pool, &key(4), "skipper", -0.5).await;
    let _ = drain(&dispatcher).await;
    let runs = statuses(&pool).await;
    assert_eq!(
        runs[&key(3)],
        RunStatus::Enqueued,
        "allow fires over an in-flight run"
    );
    assert_eq!(runs[&key(4)], RunStatus::Skipped);
    let reason = field(&pool, &key(4), "reason").await.expect("reason");
    assert!(reason.contains(&key(2)), "{reason}");

    report(&pool, &key(2), Reported::Success).await;
    run(&pool, &key(5), "skipper", -0.1).await;
    let _ = drain(&dispatcher).await;
    assert_eq!(
        statuses(&pool).await[&key(5)],
        RunStatus::Enqueued,
        "the blocker ended"
    );
}

#[tokio::test]
async fn overlap_queue_releases_in_order() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "q", "queue", None).await;
    for n in 1..=3 {
        run(&pool, &key(n), "q", -4.0 + n as f64).await;
    }
    let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), config());
    let _ = drain(&dispatcher).await;
    let expect = |a, b, c| HashMap::from([(key(1), a), (key(2), b), (key(3), c)]);
    assert_eq!(
        statuses(&pool).await,
        expect(RunStatus::Enqueued, RunStatus::Queued, RunStatus::Queued)
    );
    report(&pool, &key(1), Reported::Success).await;
    assert_eq!(
        statuses(&pool).await,
        expect(RunStatus::Success, RunStatus::Pending, RunStatus::Queued)
    );
    let _ = drain(&dispatcher).await;
    assert_eq!(
        statuses(&pool).await,
        expect(RunStatus::Success, RunStatus::Enqueued, RunStatus::Queued)
    );
    report(&pool, &key(2), Reported::Failed).await;
    let _ = drain(&dispatcher).await;
    assert_eq!(
        statuses(&pool).await,
        expect(RunStatus::Success, RunStatus::Failed, RunStatus::Enqueued)
    );
    assert_eq!(stream_ids(&launcher).await, vec![key(1), key(2), key(3)]);
}

#[tokio::test]
async fn max_run_seconds_times_out_and_unblocks() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "q", "queue", Some(60)).await;
    run(&pool, &key(1), "q", -2.0).await;
    run(&pool, &key(2), "q", -1.0).await;
    let dispatcher = Dispatcher::new(pool.clone(), launcher, config());
    let _ = drain(&dispatcher).await;
    assert_eq!(
        dispatcher_support::sweeper(&pool, dispatcher.launcher())
            .sweep()
            .await
            .expect("sweep"),
        (0, 0),
        "not yet too old"
    );
    // The run was published 61 s ago, as far as the database knows.
    sqlx::query("update schedule_runs set published_at = published_at - interval '61 s'")
        .execute(&pool)
        .await
        .expect("age the run");
    assert_eq!(
        dispatcher_support::sweeper(&pool, dispatcher.launcher())
            .sweep()
            .await
            .expect("sweep"),
        (1, 1)
    );
    let runs = statuses(&pool).await;
    assert_eq!(
        (runs[&key(1)], runs[&key(2)]),
        (RunStatus::TimedOut, RunStatus::Pending)
    );
    let _ = drain(&dispatcher).await;
    assert_eq!(statuses(&pool).await[&key(2)], RunStatus::Enqueued);
}

#[tokio::test]
async fn stale_and_unlaunchable_runs_fail_with_a_reason() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    // Over the server's 1 MiB max_payload: a permanent error.
    let nodes: Vec<_> = (0..40_000)
        .map(|n| serde_json::json!({"id": format!("node-{n:08}-padding-padding")}))
        .collect();
    sqlx::query("insert into workflows (workflow_id, version, dag) values ('wf', 2, $1)")
        .bind(serde_json::json!({ "nodes": nodes }))
        .execute(&pool)
        .await
        .expect("big workflow");
    schedule(&pool, "s", "allow", None).await;
    run(&pool, &key(1), "s", -400.0).await;
    run(&pool, &key(2), "s", -1.0).await;
    run(&pool, &key(3), "s", -1.0).await;
    run(&pool, &key(4), "s", -1.0).await;
    sqlx::query("update schedule_runs set version = 9 where idempotency_key = $1")
        .bind(key(2))
        .execute(&pool)
        .await
        .expect("missing version");
    sqlx::query("update schedule_runs set version = 2 where idempotency_key = $1")
        .bind(key(3))
        .execute(&pool)
        .await
        .expect("big version");
    let dispatcher = Dispatcher::new(pool.clone(), launcher.clone(), config());
    let _ = drain(&dispatcher).await;
    let runs = statuses(&pool).await;
    assert_eq!(runs[&key(1)], RunStatus::Failed);
    let reason = |n| {
        let pool = pool.clone();
        async move { field(&pool, &key(n), "reason").await }
    };
    assert_eq!(reason(1).await.as_deref(), Some("launch deadline passed"));
    assert_eq!(runs[&key(2)], RunStatus::Failed);
    assert!(reason(2)
        .await
        .expect("reason")
        .contains("version 9 not found"));
    assert_eq!(runs[&key(3)], RunStatus::Failed);
    assert!(reason(3).await.expect("reason").contains("permanently"));
    assert_eq!(runs[&key(4)], RunStatus::Enqueued);
    assert_eq!(stream_ids(&launcher).await, vec![key(4)]);
}
