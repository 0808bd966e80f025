//! sidekiq#6804: a slot was lost when the process was killed in the middle of a tick. The
//! kill tests of `planner_race.rs`, `dispatcher.rs` and `intake_kill.rs` abort a child
//! process at the planner's claim, before its commit, and between the stream's
//! acknowledgement and the dispatcher's record; this one aborts it right after the record
//! (`dispatcher_after_commit`), the last crash point of a tick. On real PostgreSQL and
//! nats-server.

use crate::dispatcher_support;

use std::process::Command;

use dispatcher_support::{allow_runs_due, config, nats, statuses, stream_ids};
use kairos_core::RunStatus;
use kairos_store::PgPool;
use kairos_testkit::TestDb;
use kairos_worker::dispatcher::Dispatcher;

/// The child process: one dispatcher round, which must die at the crash point it is given.
#[tokio::test]
#[ignore = "run as a child process by the kill test"]
async fn child_round_killed_at_its_crash_point() {
    let (Ok(db), Ok(nats_url)) = (
        std::env::var("KAIROS_TEST_DB_URL"),
        std::env::var("KAIROS_TEST_NATS_URL"),
    ) else {
        return;
    };
    let pool = PgPool::connect(&db).await.expect("child connects");
    let config_nats = kairos_launcher::NatsConfig::new(nats_url);
    let launcher = kairos_launcher::NatsLauncher::connect(config_nats)
        .await
        .expect("nats");
    let _ = Dispatcher::new(pool, launcher, config()).round().await;
    panic!("the crash point was not reached");
}

/// 50 due runs; a child dispatcher is killed (abort, as `kill -9`) right after it recorded
/// and committed them: every run is `ENQUEUED` once with one message, and the next
/// dispatcher finds nothing to send again.
#[tokio::test]
async fn sidekiq_6804_killed_right_after_the_record_a_tick_is_neither_lost_nor_sent_again() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let (server, launcher) = nats().await;
    let keys = allow_runs_due(&pool, 50).await;
    let status = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            test_name!("child_round_killed_at_its_crash_point"),
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("KAIROS_CRASH_AT", "dispatcher_after_commit")
        .env("KAIROS_TEST_DB_URL", db.url())
        .env("KAIROS_TEST_NATS_URL", server.url())
        .status()
        .expect("spawn child");
    assert!(!status.success(), "the child must die at the crash point");
    let recorded = statuses(&pool).await;
    assert_eq!(recorded.len(), 50);
    assert!(
        recorded.values().all(|s| *s == RunStatus::Enqueued),
        "the record was committed before the kill: {recorded:?}"
    );
    assert_eq!(stream_ids(&launcher).await, keys, "one message per run");

    let round = Dispatcher::new(pool.clone(), launcher.clone(), config())
        .round()
        .await
        .expect("the next round");
    assert_eq!(round.enqueued, 0, "nothing is sent again: {round:?}");
    assert_eq!(statuses(&pool).await, recorded);
    assert_eq!(
        stream_ids(&launcher).await,
        keys,
        "still one message per run"
    );
}
