//! Measurement, not a check: dispatch throughput and publish lag for 10,000 runs due now,
//! through the real `NatsLauncher` on a local nats-server. Run with
//! `cargo test -p kairos-worker --test dispatcher_bench -- --ignored --nocapture`.

mod dispatcher_support;

use std::time::{Duration, Instant};

use dispatcher_support::{nats, schedule, until, workflow};
use kairos_store::PgPool;
use kairos_worker::dispatcher::{Dispatcher, DispatcherConfig};

const RUNS: i64 = 10_000;

#[sqlx::test(migrator = "kairos_store::MIGRATOR")]
#[ignore = "measurement; prints figures"]
async fn dispatch_throughput_and_lag(pool: PgPool) {
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "bench", "allow", None).await;
    // 10,000 runs whose fire_at is "now" when the dispatcher starts.
    sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, workflow_id, \
         version, user_id) \
         select lpad(to_hex(n), 64, '0'), 'bench', date_trunc('second', now()), now(), \
           'wf', 1, 'u' from generate_series(1, $1) as n",
    )
    .bind(RUNS)
    .execute(&pool)
    .await
    .expect("insert runs");
    sqlx::query("update schedule_runs set fire_at = clock_timestamp()")
        .execute(&pool)
        .await
        .expect("fire now");
    let config = DispatcherConfig::new(500, Duration::from_millis(100), Duration::from_secs(300));
    let dispatcher = Dispatcher::new(pool.clone(), launcher, config);
    let started = Instant::now();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let looping =
        tokio::spawn(async move { dispatcher.run(async { stopped.await.unwrap_or(()) }).await });
    until(Duration::from_secs(300), "all runs enqueued", || async {
        let pending: i64 =
            sqlx::query_scalar("select count(*) from schedule_runs where status <> 'ENQUEUED'")
                .fetch_one(&pool)
                .await
                .expect("count");
        pending == 0
    })
    .await;
    let elapsed = started.elapsed();
    stop.send(()).expect("loop alive");
    looping.await.expect("join").expect("loop");
    let (p50, p99, max): (f64, f64, f64) = sqlx::query_as(
        "select percentile_cont(0.5) within group (order by lag), \
                percentile_cont(0.99) within group (order by lag), max(lag)::float8 \
         from (select (extract(epoch from published_at - fire_at) * 1000)::float8 as lag \
               from schedule_runs) as l",
    )
    .fetch_one(&pool)
    .await
    .expect("lag");
    println!(
        "dispatched {RUNS} runs in {:.2} s = {:.0} runs/s; published_at - fire_at: \
         p50 {p50:.0} ms, p99 {p99:.0} ms, max {max:.0} ms",
        elapsed.as_secs_f64(),
        RUNS as f64 / elapsed.as_secs_f64()
    );
}
