//! Regions on a real NATS supercluster (one server per region, joined by gateways): a run
//! launches in its schedule's region; while that region is lost its new runs wait, then go
//! to the first ready fallback once the region has been away for `fallback_after`; a run
//! recorded for the lost region waits for it; when it returns, new runs go home again. Every
//! run reaches exactly one region's stream, once, also when the dispatcher that recorded its
//! launch is killed before publishing it and its region is lost meanwhile.

use crate::dispatcher_support;

use std::collections::HashMap;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dispatcher_support::{config, field, key, run, statuses, until, workflow};
use kairos_core::RunStatus;
use kairos_launcher::status::read_stream;
use kairos_launcher::{NatsConfig, NatsLauncher};
use kairos_store::PgPool;
use kairos_testkit::{sqlx, NatsSupercluster, TestDb};
use kairos_worker::dispatcher::Dispatcher;
use kairos_worker::regions::Regions;
use kairos_worker::sweep::{SweepConfig, Sweeper};

const REGIONS: [&str; 3] = ["eu", "us", "ap"];
/// Longer than a probe of a lost region takes to fail (`PROBE_TIMEOUT`), so the test sees
/// the region unavailable before it is away.
const FALLBACK_AFTER: Duration = Duration::from_secs(6);

fn names() -> Vec<String> {
    REGIONS.iter().map(|region| region.to_string()).collect()
}

/// A launcher on `url` that knows the three regions (short ack timeout, so a lost region
/// fails fast), retried while the supercluster is still placing the streams.
async fn launcher(url: String) -> NatsLauncher {
    let mut config = NatsConfig::new(url);
    config.regions = names();
    config.ack_timeout = Duration::from_secs(1);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match NatsLauncher::connect(config.clone()).await {
            Ok(launcher) => return launcher,
            Err(err) if err.is_retryable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(err) => panic!("connect to the supercluster: {err:?}"),
        }
    }
}

/// A schedule of `wf` v1 (overlap `allow`) homed in `region` with `fallbacks`.
async fn schedule(pool: &PgPool, id: &str, region: Option<&str>, fallbacks: &[&str]) {
    let fallbacks: Vec<String> = fallbacks.iter().map(|r| r.to_string()).collect();
    sqlx::query(
        "insert into schedules (schedule_id, workflow_id, version, user_id, cron_expr, timezone, \
         overlap_policy, region, fallback_regions) \
         values ($1, 'wf', 1, 'u', '* * * * *', 'UTC', 'allow', $2, $3)",
    )
    .bind(id)
    .bind(region)
    .bind(fallbacks)
    .execute(pool)
    .await
    .expect("insert schedule");
}

/// Every launch message by key: the streams it is in, with the subject and the body's
/// `region`.
async fn launches(reader: &NatsLauncher) -> HashMap<String, Vec<(String, String, Option<String>)>> {
    let mut found: HashMap<String, Vec<(String, String, Option<String>)>> = HashMap::new();
    let streams = REGIONS
        .iter()
        .map(|region| format!("KAIROS_LAUNCH_{}", region.to_uppercase()))
        .chain(["KAIROS_LAUNCH".to_string()]);
    for stream in streams {
        for message in read_stream(reader, &stream).await.expect("read stream") {
            let body: serde_json::Value =
                serde_json::from_slice(&message.payload).expect("a JSON launch message");
            let key = body["idempotency_key"].as_str().expect("a key").to_string();
            let region = body["region"].as_str().map(str::to_string);
            found
                .entry(key)
                .or_default()
                .push((stream.clone(), message.subject, region));
        }
    }
    found
}

/// The runs of the test, by name; each key is the hex of its place here.
const RUNS: [&str; 6] = [
    "home-1", "plain-1", "moved-1", "waits-1", "pinned-1", "home-2",
];

/// The key of run `name`.
fn k(name: &str) -> String {
    let index = RUNS
        .iter()
        .position(|run| *run == name)
        .expect("a run of RUNS");
    key(index as u64 + 1)
}

async fn status(pool: &PgPool, name: &str) -> RunStatus {
    statuses(pool).await[&k(name)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_launch_in_their_region_fall_back_while_it_is_away_and_go_home_when_it_returns() {
    tokio::time::timeout(Duration::from_secs(120), lost_and_returned())
        .await
        .expect("the test finishes within two minutes");
}

async fn lost_and_returned() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let mut supercluster = tokio::task::spawn_blocking(|| NatsSupercluster::start(&REGIONS))
        .await
        .expect("start the supercluster");
    let launcher = launcher(supercluster.url("eu")).await;
    workflow(&pool).await;
    schedule(&pool, "in-us", Some("us"), &["ap"]).await;
    schedule(&pool, "alone-us", Some("us"), &[]).await;
    schedule(&pool, "nowhere", None, &[]).await;
    let regions = Regions::new(&names(), FALLBACK_AFTER);
    let watching = tokio::spawn(
        regions
            .clone()
            .watch(Arc::new(launcher.clone()), Duration::from_millis(200)),
    );
    let dispatcher =
        Dispatcher::new(pool.clone(), launcher.clone(), config()).with_regions(regions.clone());

    // A ready home takes its runs; a run without a region goes to the plain stream.
    run(&pool, &k("home-1"), "in-us", -1.0).await;
    run(&pool, &k("plain-1"), "nowhere", -1.0).await;
    let round = dispatcher.round().await.expect("round");
    assert_eq!(round.enqueued, 2, "{round:?}");
    assert_eq!(
        field(&pool, &k("home-1"), "launch_region").await.as_deref(),
        Some("us")
    );
    assert_eq!(field(&pool, &k("plain-1"), "launch_region").await, None);

    // The region is lost: its new runs wait (nothing recorded for them) until it is away.
    tokio::task::block_in_place(|| supercluster.kill("us"));
    until(Duration::from_secs(10), "us seen unavailable", || async {
        regions.unavailable() == ["us".to_string()]
    })
    .await;
    run(&pool, &k("moved-1"), "in-us", -1.0).await;
    run(&pool, &k("waits-1"), "alone-us", -1.0).await;
    // A run recorded for us before it was lost (its publish may have reached us).
    run(&pool, &k("pinned-1"), "in-us", -1.0).await;
    sqlx::query("update schedule_runs set launch_region = 'us' where idempotency_key = $1")
        .bind(k("pinned-1"))
        .execute(&pool)
        .await
        .expect("pin");
    let round = dispatcher.round().await.expect("round");
    assert_eq!((round.held, round.enqueued), (2, 0), "{round:?}");
    assert_eq!(field(&pool, &k("moved-1"), "launch_region").await, None);

    // Away: the run with a fallback goes to ap; the one without is pinned home and left
    // alone; the pinned run is not claimed while us is unavailable.
    tokio::time::sleep(FALLBACK_AFTER).await;
    let round = dispatcher.round().await.expect("round");
    assert_eq!((round.enqueued, round.held), (1, 1), "{round:?}");
    assert_eq!(
        field(&pool, &k("moved-1"), "launch_region")
            .await
            .as_deref(),
        Some("ap")
    );
    assert_eq!(status(&pool, "moved-1").await, RunStatus::Enqueued);
    assert_eq!(
        field(&pool, &k("waits-1"), "launch_region")
            .await
            .as_deref(),
        Some("us")
    );
    for waiting in ["waits-1", "pinned-1"] {
        assert_eq!(
            status(&pool, waiting).await,
            RunStatus::Pending,
            "{waiting}"
        );
    }
    let round = dispatcher.round().await.expect("round");
    assert_eq!(
        round.claimed, 0,
        "runs pinned to a lost region are left alone: {round:?}"
    );

    // The region returns: the waiting runs go there, and new runs go home again.
    tokio::task::block_in_place(|| supercluster.restart("us"));
    until(Duration::from_secs(30), "us ready again", || async {
        regions.unavailable().is_empty()
    })
    .await;
    run(&pool, &k("home-2"), "in-us", -1.0).await;
    until(Duration::from_secs(30), "every run enqueued", || async {
        let round = dispatcher.round().await.expect("round");
        let _ = round;
        statuses(&pool)
            .await
            .values()
            .all(|status| *status == RunStatus::Enqueued)
    })
    .await;
    watching.abort();

    let found = launches(&launcher).await;
    let expected = [
        ("home-1", "KAIROS_LAUNCH_US", Some("us")),
        ("plain-1", "KAIROS_LAUNCH", None),
        ("moved-1", "KAIROS_LAUNCH_AP", Some("ap")),
        ("waits-1", "KAIROS_LAUNCH_US", Some("us")),
        ("pinned-1", "KAIROS_LAUNCH_US", Some("us")),
        ("home-2", "KAIROS_LAUNCH_US", Some("us")),
    ];
    assert_eq!(found.len(), expected.len(), "{found:?}");
    for (key, stream, region) in expected {
        let copies = &found[&k(key)];
        assert_eq!(copies.len(), 1, "{key} reached one stream once: {copies:?}");
        let (got_stream, subject, got_region) = &copies[0];
        assert_eq!(
            (got_stream.as_str(), got_region.as_deref()),
            (stream, region),
            "{key}"
        );
        let wanted = match region {
            Some(region) => format!("kairos.launch.{region}.wf"),
            None => "kairos.launch.wf".to_string(),
        };
        assert_eq!(subject, &wanted, "{key}");
    }
}

/// The child of the kill test: one round with the three regions ready, which aborts at the
/// crash point `KAIROS_CRASH_AT` names (`dispatcher_before_publish`: the wave is committed
/// `ENQUEUED` with its region, nothing is published).
#[tokio::test]
#[ignore = "run by the kill test below"]
async fn child_round_that_crashes_in_a_region() {
    let (Ok(db), Ok(nats_url)) = (
        std::env::var("KAIROS_TEST_DB_URL"),
        std::env::var("KAIROS_TEST_NATS_URL"),
    ) else {
        return;
    };
    let pool = PgPool::connect(&db).await.expect("child connects");
    let regions = Regions::new(&names(), FALLBACK_AFTER);
    let _ = Dispatcher::new(pool, launcher(nats_url).await, config())
        .with_regions(regions)
        .round()
        .await;
    panic!("the crash point was not reached");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatcher_killed_before_publishing_leaves_its_runs_to_their_recorded_region() {
    tokio::time::timeout(Duration::from_secs(120), killed_before_publishing())
        .await
        .expect("the test finishes within two minutes");
}

async fn killed_before_publishing() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let mut supercluster = tokio::task::spawn_blocking(|| NatsSupercluster::start(&REGIONS))
        .await
        .expect("start the supercluster");
    let url = supercluster.url("eu");
    let launcher = launcher(url.clone()).await;
    workflow(&pool).await;
    schedule(&pool, "in-us", Some("us"), &["ap"]).await;
    let keys: Vec<String> = (100..120).map(key).collect();
    for run_key in &keys {
        run(&pool, run_key, "in-us", -1.0).await;
    }

    let status = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            test_name!("child_round_that_crashes_in_a_region"),
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("KAIROS_CRASH_AT", "dispatcher_before_publish")
        .env("KAIROS_TEST_DB_URL", db.url())
        .env("KAIROS_TEST_NATS_URL", &url)
        .status()
        .expect("spawn child");
    assert!(!status.success(), "the child must die at the crash point");
    for run_key in &keys {
        assert_eq!(statuses(&pool).await[run_key], RunStatus::Enqueued);
        assert_eq!(
            field(&pool, run_key, "launch_region").await.as_deref(),
            Some("us")
        );
    }
    assert!(
        launches(&launcher).await.is_empty(),
        "nothing was published"
    );

    // The region is lost and away: no dispatcher takes the runs elsewhere, and the sweep
    // cannot publish them to the region they were recorded for.
    tokio::task::block_in_place(|| supercluster.kill("us"));
    let regions = Regions::new(&names(), FALLBACK_AFTER);
    let watching = tokio::spawn(
        regions
            .clone()
            .watch(Arc::new(launcher.clone()), Duration::from_millis(200)),
    );
    until(Duration::from_secs(20), "us seen unavailable", || async {
        regions.unavailable() == ["us".to_string()]
    })
    .await;
    tokio::time::sleep(FALLBACK_AFTER).await;
    let dispatcher =
        Dispatcher::new(pool.clone(), launcher.clone(), config()).with_regions(regions.clone());
    let round = dispatcher.round().await.expect("round");
    assert_eq!(round.claimed, 0, "{round:?}");
    let sweeper = Sweeper::new(
        pool.clone(),
        launcher.clone(),
        SweepConfig {
            unacknowledged_after: Duration::ZERO,
            every: Duration::from_millis(20),
            ..SweepConfig::default()
        },
    );
    sweeper.sweep().await.expect("sweep");
    let open = kairos_store::dispatch::waves::open_count(&pool)
        .await
        .expect("waves");
    assert_eq!(open, 1, "the wave stays open while its region is lost");

    // The region returns: the sweep publishes the wave there, each run once.
    tokio::task::block_in_place(|| supercluster.restart("us"));
    until(Duration::from_secs(30), "us ready again", || async {
        regions.unavailable().is_empty()
    })
    .await;
    until(
        Duration::from_secs(30),
        "the wave published and closed",
        || async {
            sweeper.sweep().await.expect("sweep");
            kairos_store::dispatch::waves::open_count(&pool)
                .await
                .expect("waves")
                == 0
        },
    )
    .await;
    watching.abort();
    let found = launches(&launcher).await;
    assert_eq!(found.len(), keys.len(), "{found:?}");
    for run_key in &keys {
        let copies = &found[run_key];
        assert_eq!(copies.len(), 1, "{copies:?}");
        assert_eq!(copies[0].0, "KAIROS_LAUNCH_US");
    }
}
