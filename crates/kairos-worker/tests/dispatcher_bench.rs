//! Measurement, not a check: dispatch throughput and publish lag for 10,000 runs due now,
//! through the real `NatsLauncher` on a local nats-server. Run with
//! `cargo test -p kairos-worker --test integration dispatcher_bench:: -- --ignored --nocapture`.
//! `KAIROS_BENCH_METRICS=1` records metrics into a Prometheus recorder (as `kairos serve`
//! does); without it no recorder is set and every metrics call is a no-op, so the two runs
//! measure the overhead of metrics.

use crate::dispatcher_support;

use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use std::time::{Duration, Instant};

use dispatcher_support::{nats, schedule, until, workflow};
use kairos_worker::dispatcher::{Dispatcher, DispatcherConfig};

const RUNS: i64 = 10_000;

#[tokio::test]
#[ignore = "measurement; prints figures"]
async fn dispatch_throughput_and_lag() {
    let db = TestDb::new().await;
    let pool = db.pool();
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
    let with_metrics = std::env::var("KAIROS_BENCH_METRICS").is_ok_and(|v| v == "1");
    let recorder = kairos_worker::metrics::recorder();
    let _local = with_metrics.then(|| metrics::set_default_local_recorder(&recorder));
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
    if with_metrics {
        let text = recorder.handle().render();
        let emitted = kairos_testkit::prometheus::sample(&text, "kairos_runs_emitted_total", &[]);
        let drift =
            kairos_testkit::prometheus::sample(&text, "kairos_fire_drift_seconds_count", &[]);
        assert_eq!((emitted, drift), (Some(RUNS as f64), Some(RUNS as f64)));
    }
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
        "metrics {}: dispatched {RUNS} runs in {:.2} s = {:.0} runs/s; published_at - fire_at: \
         p50 {p50:.0} ms, p99 {p99:.0} ms, max {max:.0} ms",
        if with_metrics { "on" } else { "off" },
        elapsed.as_secs_f64(),
        RUNS as f64 / elapsed.as_secs_f64()
    );
}

/// The recording cost alone: a round of 500 enqueued ticks (500 drift samples) recorded
/// into a Prometheus recorder, 2,000 times, plus one render; prints ns per run.
#[test]
#[ignore = "measurement; prints figures"]
fn recording_cost_per_run() {
    use kairos_worker::dispatcher::Round;
    let recorder = kairos_worker::metrics::recorder();
    let _local = metrics::set_default_local_recorder(&recorder);
    let round = Round {
        claimed: 500,
        enqueued: 500,
        drift_seconds: (0..500).map(|n| 0.001 * f64::from(n)).collect(),
        ..Round::default()
    };
    let rounds = 2_000u32;
    let started = Instant::now();
    for _ in 0..rounds {
        round.record(Duration::from_millis(5));
    }
    let recorded = started.elapsed();
    let started = Instant::now();
    let text = recorder.handle().render();
    let rendered = started.elapsed();
    let runs = f64::from(rounds) * 500.0;
    assert!(text.contains("kairos_fire_drift_seconds_count 1000000"));
    println!(
        "recorded {runs} runs in {:.1} ms = {:.0} ns per run; render after them {:.1} ms",
        recorded.as_secs_f64() * 1e3,
        recorded.as_secs_f64() * 1e9 / runs,
        rendered.as_secs_f64() * 1e3
    );
}
