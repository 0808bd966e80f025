//! `max_in_flight` on real PostgreSQL and a real nats-server: racing dispatchers never put
//! more than N runs of a schedule in flight, a run past N follows the overlap policy, runs
//! that end release as many queued runs as ended, and the database itself refuses a run
//! past the limit, also from two transactions racing for the last slot.

use crate::dispatcher_support;

use std::collections::{HashMap, HashSet};

use dispatcher_support::{config, drain, key, launcher, nats, run, statuses, stream_ids, workflow};
use kairos_core::RunStatus;
use kairos_store::PgPool;
use kairos_testkit::{sqlx, TestDb};
use kairos_worker::dispatcher::Dispatcher;
use kairos_worker::intake::{parse_report, Intake, Item};
use serde_json::json;

/// A schedule of `wf` v1 under `overlap` with `max_in_flight`.
async fn limited(pool: &PgPool, id: &str, overlap: &str, max_in_flight: Option<i32>) {
    sqlx::query(
        "insert into schedules (schedule_id, workflow_id, version, user_id, cron_expr, timezone, \
         overlap_policy, max_in_flight) values ($1, 'wf', 1, 'u', '* * * * *', 'UTC', $2, $3)",
    )
    .bind(id)
    .bind(overlap)
    .bind(max_in_flight)
    .execute(pool)
    .await
    .expect("insert schedule");
}

/// Statuses of the runs of `schedule_id`, counted.
async fn counts(pool: &PgPool, schedule_id: &str) -> HashMap<RunStatus, usize> {
    let rows: Vec<(String,)> =
        sqlx::query_as("select status from schedule_runs where schedule_id = $1")
            .bind(schedule_id)
            .fetch_all(pool)
            .await
            .expect("statuses");
    let mut counted = HashMap::new();
    for (status,) in rows {
        *counted
            .entry(status.parse().expect("a run status"))
            .or_default() += 1;
    }
    counted
}

async fn futures_join<F: std::future::Future>(futures: impl Iterator<Item = F>) {
    futures::future::join_all(futures).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_dispatchers_never_put_more_than_max_in_flight_runs_out() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (server, first) = nats().await;
    workflow(&pool).await;
    // 8 `skip` schedules with at most 3 in flight, 12 overdue runs each, and one with the
    // default (one).
    for s in 0..8u64 {
        let id = format!("three-{s}");
        limited(&pool, &id, "skip", Some(3)).await;
        for n in 0..12 {
            run(&pool, &key(s * 100 + n), &id, -3.0 + n as f64 / 10.0).await;
        }
    }
    limited(&pool, "one", "skip", None).await;
    for n in 0..5 {
        run(&pool, &key(9_000 + n), "one", -2.0 + n as f64 / 10.0).await;
    }
    let mut dispatchers = Vec::new();
    for _ in 0..4 {
        let launcher = launcher(&server).await;
        dispatchers.push(Dispatcher::new(pool.clone(), launcher, config()));
    }
    futures_join(dispatchers.iter().map(drain)).await;

    for s in 0..8u64 {
        let got = counts(&pool, &format!("three-{s}")).await;
        assert_eq!(
            got.get(&RunStatus::Enqueued),
            Some(&3),
            "three-{s}: {got:?}"
        );
        assert_eq!(got.get(&RunStatus::Skipped), Some(&9), "three-{s}: {got:?}");
    }
    let one = counts(&pool, "one").await;
    assert_eq!(one.get(&RunStatus::Enqueued), Some(&1), "{one:?}");
    assert_eq!(one.get(&RunStatus::Skipped), Some(&4), "{one:?}");
    let slots: i64 = sqlx::query_scalar("select count(*) from runs_in_flight")
        .fetch_one(&pool)
        .await
        .expect("slots");
    assert_eq!(slots, 8 * 3 + 1, "one slot per run in flight");
    let enqueued: HashSet<String> = statuses(&pool)
        .await
        .into_iter()
        .filter(|(_, status)| *status == RunStatus::Enqueued)
        .map(|(key, _)| key)
        .collect();
    let ids = stream_ids(&first).await;
    assert_eq!(ids.len(), 25, "exactly one message per launched run");
    assert_eq!(ids.into_iter().collect::<HashSet<_>>(), enqueued);
    // The reason of a skip names the limit.
    let reason: String = sqlx::query_scalar(
        "select reason from schedule_runs where schedule_id = 'three-0' and status = 'SKIPPED' \
         limit 1",
    )
    .fetch_one(&pool)
    .await
    .expect("a skipped run");
    assert!(
        reason.starts_with("overlap skip: 3 runs are in flight (max_in_flight 3)"),
        "{reason}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_runs_wait_for_a_free_slot_and_each_end_releases_one() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    limited(&pool, "q", "queue", Some(2)).await;
    for n in 0..6 {
        run(&pool, &key(n), "q", -3.0 + n as f64 / 10.0).await;
    }
    let dispatcher = Dispatcher::new(pool.clone(), launcher, config());
    drain(&dispatcher).await;
    use RunStatus::{Enqueued, Queued, Success};
    let order = |all: HashMap<String, RunStatus>| (0..6).map(|n| all[&key(n)]).collect::<Vec<_>>();
    assert_eq!(
        order(statuses(&pool).await),
        [Enqueued, Enqueued, Queued, Queued, Queued, Queued]
    );
    // Both runs in flight end in one batch of the intake: two queued runs go out, oldest
    // first.
    let intake = Intake::new(pool.clone());
    let items: Vec<Item> = (0..2)
        .map(|n| Item {
            key: key(n),
            report: parse_report(&key(n), &json!({"status": "SUCCESS"})).expect("report"),
        })
        .collect();
    for applied in intake.report_many(items).await {
        applied.expect("applied");
    }
    drain(&dispatcher).await;
    assert_eq!(
        order(statuses(&pool).await),
        [Success, Success, Enqueued, Enqueued, Queued, Queued]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_refuses_a_run_past_max_in_flight_even_from_racing_transactions() {
    let db = TestDb::new().await;
    let pool = db.pool();
    workflow(&pool).await;
    limited(&pool, "s", "skip", Some(2)).await;
    for n in 0..6 {
        run(&pool, &key(n), "s", -1.0).await;
    }
    let launch = |n: u64| {
        sqlx::query(
            "update schedule_runs set status = 'ENQUEUED', exclusive = true \
             where idempotency_key = $1",
        )
        .bind(key(n))
    };
    launch(0).execute(&pool).await.expect("first slot");
    launch(1).execute(&pool).await.expect("second slot");
    let refused = launch(2).execute(&pool).await.expect_err("past the limit");
    let refused = refused.as_database_error().expect("a database error");
    assert_eq!(refused.code().as_deref(), Some("23505"), "unique_violation");
    assert_eq!(refused.constraint(), Some("schedule_runs_one_in_flight"));

    // Run 0 ends: one slot is free, and two transactions race for it.
    sqlx::query("update schedule_runs set status = 'SUCCESS' where idempotency_key = $1")
        .bind(key(0))
        .execute(&pool)
        .await
        .expect("run 0 ends");
    let mut first = pool.begin().await.expect("first transaction");
    launch(2)
        .execute(&mut *first)
        .await
        .expect("takes the slot");
    let second = tokio::spawn({
        let pool = pool.clone();
        async move {
            let mut tx = pool.begin().await.expect("second transaction");
            sqlx::query(
                "update schedule_runs set status = 'ENQUEUED', exclusive = true \
                 where idempotency_key = $1",
            )
            .bind(key(3))
            .execute(&mut *tx)
            .await
            .map(|_| ())
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    first.commit().await.expect("first commits");
    let raced = second
        .await
        .expect("join")
        .expect_err("the second must fail");
    let raced = raced.as_database_error().expect("a database error");
    assert_eq!(raced.code().as_deref(), Some("23505"), "{raced}");
    let in_flight: i64 = sqlx::query_scalar(
        "select count(*) from schedule_runs where schedule_id = 's' and status = 'ENQUEUED'",
    )
    .fetch_one(&pool)
    .await
    .expect("count");
    assert_eq!(in_flight, 2);

    // A limit lowered below the runs in flight admits nothing until enough of them end.
    sqlx::query("update schedules set max_in_flight = 1 where schedule_id = 's'")
        .execute(&pool)
        .await
        .expect("lowered");
    sqlx::query("update schedule_runs set status = 'SUCCESS' where idempotency_key = $1")
        .bind(key(1))
        .execute(&pool)
        .await
        .expect("run 1 ends");
    launch(4)
        .execute(&pool)
        .await
        .expect_err("still one in flight");
    sqlx::query("update schedule_runs set status = 'SUCCESS' where idempotency_key = $1")
        .bind(key(2))
        .execute(&pool)
        .await
        .expect("run 2 ends");
    launch(4)
        .execute(&pool)
        .await
        .expect("a slot under the new limit");
}
