//! Pre-staging on real PostgreSQL and nats-server: a run due within the lead is claimed and
//! prepared early, then published no earlier than its `fire_at` on the database's clock —
//! even from an instance whose clock is five minutes fast — and the runs of one round go out
//! in waves, each recorded before the next is decided.

use crate::dispatcher_support;

use chrono::{DateTime, TimeDelta, Utc};
use dispatcher_support::{key, nats, prestaged, run, schedule, statuses, workflow};
use kairos_core::RunStatus;
use kairos_store::PgPool;
use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use kairos_worker::dispatcher::Dispatcher;

fn fast_clock() -> DateTime<Utc> {
    Utc::now() + TimeDelta::minutes(5)
}

/// `published_at - fire_at` of `key`, in seconds.
async fn published_after_fire(pool: &PgPool, key: &str) -> f64 {
    sqlx::query_scalar(
        "select extract(epoch from published_at - fire_at)::float8 from schedule_runs \
         where idempotency_key = $1",
    )
    .bind(key)
    .fetch_one(pool)
    .await
    .expect("published_at")
}

#[tokio::test]
async fn a_run_due_within_the_lead_is_claimed_early_and_published_at_its_fire_at() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "s", "allow", None).await;
    run(&pool, &key(1), "s", 1.0).await;
    run(&pool, &key(2), "s", 30.0).await;
    let dispatcher = Dispatcher::new(pool.clone(), launcher, prestaged(3000));
    let round = dispatcher.round().await.expect("round");
    assert_eq!(
        (round.claimed, round.enqueued),
        (1, 1),
        "only the run inside the lead"
    );
    let early = published_after_fire(&pool, &key(1)).await;
    assert!(
        (0.0..1.0).contains(&early),
        "published {early} s after fire_at: never before it"
    );
    assert_eq!(statuses(&pool).await[&key(2)], RunStatus::Pending);
}

#[tokio::test]
async fn an_instance_clock_five_minutes_fast_never_publishes_early() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "s", "allow", None).await;
    run(&pool, &key(1), "s", 1.5).await;
    let mut config = prestaged(3000);
    config.instance_clock = fast_clock;
    let dispatcher = Dispatcher::new(pool.clone(), launcher, config);
    let round = dispatcher.round().await.expect("round");
    assert_eq!(round.enqueued, 1);
    // `published_at` is the instance's estimate of the database's clock at the PubAck: a
    // publish before fire_at shows below 0, an uncorrected fast clock about 300 s above.
    let early = published_after_fire(&pool, &key(1)).await;
    assert!(
        (0.0..1.0).contains(&early),
        "published {early} s after fire_at on the database's clock"
    );
}

#[tokio::test]
async fn a_round_publishes_in_waves_and_each_wave_sees_the_one_before() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "free", "allow", None).await;
    schedule(&pool, "one", "skip", None).await;
    run(&pool, &key(3), "free", -0.1).await;
    run(&pool, &key(4), "one", 0.8).await;
    run(&pool, &key(5), "one", 1.6).await;
    let dispatcher = Dispatcher::new(pool.clone(), launcher, prestaged(3000));
    let round = dispatcher.round().await.expect("round");
    assert_eq!((round.claimed, round.enqueued, round.skipped), (3, 2, 1));
    let status = statuses(&pool).await;
    assert_eq!(status[&key(3)], RunStatus::Enqueued);
    assert_eq!(status[&key(4)], RunStatus::Enqueued);
    assert_eq!(
        status[&key(5)],
        RunStatus::Skipped,
        "the second wave saw the first run in flight (overlap skip)"
    );
    let waited: f64 = sqlx::query_scalar(
        "select extract(epoch from (select published_at from schedule_runs \
           where idempotency_key = $1) - (select published_at from schedule_runs \
           where idempotency_key = $2))::float8",
    )
    .bind(key(4))
    .bind(key(3))
    .fetch_one(&pool)
    .await
    .expect("gap");
    assert!(
        waited > 0.5,
        "the due run went out at once, not with the pre-staged one ({waited} s apart)"
    );
    assert!(published_after_fire(&pool, &key(4)).await >= 0.0);
}

#[tokio::test]
async fn a_waves_runs_are_published_when_it_is_let_out_and_drift_by_their_own_ack() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "s", "allow", None).await;
    for n in 1..=100 {
        run(&pool, &key(n), "s", -0.1).await;
    }
    let dispatcher = Dispatcher::new(pool.clone(), launcher, prestaged(1000));
    let round = dispatcher.round().await.expect("round");
    assert_eq!(round.enqueued, 100, "one batch, one wave");
    let after: DateTime<Utc> = sqlx::query_scalar("select clock_timestamp()")
        .fetch_one(&pool)
        .await
        .expect("now");
    let published: Vec<(DateTime<Utc>, DateTime<Utc>)> =
        sqlx::query_as("select published_at, fire_at from schedule_runs")
            .fetch_all(&pool)
            .await
            .expect("runs");
    assert!(
        published
            .iter()
            .all(|(at, fire_at)| fire_at <= at && *at <= after),
        "between fire_at and the database's clock after the round"
    );
    // The drift is each run's own acknowledgement: not one value for the whole wave.
    assert_eq!(round.drift_seconds.len(), 100, "every planned tick drifts");
    let distinct: std::collections::HashSet<u64> = round
        .drift_seconds
        .iter()
        .map(|drift| drift.to_bits())
        .collect();
    assert!(
        distinct.len() > 1,
        "each run has its own drift, not its wave's"
    );
}
