//! `status::lock` finds a report's run whatever its partition: first among the runs of the
//! last day (and the next hour), then, for the keys not found there, among all. A run held
//! by another transaction is named busy in either look, with that transaction, which
//! `status::ended` tells apart from one that has ended; an unknown key is neither locked nor
//! busy.

use crate::support;

use chrono::{DurationRound, TimeDelta, Utc};
use kairos_store::status::{self, RECENT_AFTER, RECENT_BEFORE};
use kairos_testkit::TestDb;
use support::{key_of, schedules, stored_run};

#[tokio::test]
async fn runs_are_found_in_every_partition_recent_first() {
    let db = TestDb::new().await;
    let pool = db.pool();
    schedules(&pool, 6).await;
    let now = Utc::now()
        .duration_trunc(TimeDelta::seconds(1))
        .expect("whole second");
    let long_ago = now - RECENT_BEFORE - TimeDelta::days(2);
    let far_ahead = now + RECENT_AFTER + TimeDelta::days(2);
    stored_run(&pool, "s1", now, "ENQUEUED").await;
    stored_run(&pool, "s2", long_ago, "STARTED").await;
    stored_run(&pool, "s3", far_ahead, "ENQUEUED").await;
    stored_run(&pool, "s4", now, "ENQUEUED").await;
    stored_run(&pool, "s5", long_ago, "STARTED").await;
    let mut keys = Vec::new();
    for s in ["s1", "s2", "s3", "s4", "s5"] {
        keys.push(key_of(&pool, s).await);
    }
    let unknown = "0".repeat(64);
    keys.push(unknown.clone());

    // Another transaction holds a recent run and an old one.
    let mut other = pool.begin().await.expect("begin");
    let held: Vec<String> = sqlx::query_scalar(
        "select idempotency_key from schedule_runs where schedule_id in ('s4', 's5') \
         for update",
    )
    .fetch_all(&mut *other)
    .await
    .expect("hold");
    assert_eq!(held.len(), 2);
    let holder: i64 = sqlx::query_scalar("select pg_current_xact_id()::text::int8")
        .fetch_one(&mut *other)
        .await
        .expect("holder");

    let mut tx = pool.begin().await.expect("begin");
    let locked = status::lock(&mut tx, &keys, Some(now)).await.expect("lock");
    let mut found: Vec<&str> = locked.runs.keys().map(String::as_str).collect();
    found.sort_unstable();
    let mut expected: Vec<&str> = keys[..3].iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(
        found, expected,
        "the recent run, the old one and the one far ahead"
    );
    assert_eq!(locked.runs[&keys[1]].run.run_at, long_ago);
    assert_eq!(locked.runs[&keys[2]].run.run_at, far_ahead);
    let mut busy = locked.busy.clone();
    busy.sort_unstable();
    let mut expected_busy = vec![keys[3].clone(), keys[4].clone()];
    expected_busy.sort_unstable();
    assert_eq!(busy, expected_busy, "held runs, recent or not, are busy");
    assert!(!locked.runs.contains_key(&unknown) && !locked.busy.contains(&unknown));
    assert_eq!(locked.now, now);
    assert_eq!(
        locked.holding.get(&keys[3]),
        Some(&holder),
        "the holder is told"
    );
    assert_eq!(locked.holding.get(&keys[4]), Some(&holder));
    assert_eq!(locked.holding.len(), 2);
    assert!(
        status::ended(&pool, &[holder])
            .await
            .expect("ended")
            .is_empty(),
        "the holder is in progress"
    );
    other.commit().await.expect("commit");
    assert_eq!(
        status::ended(&pool, &[holder]).await.expect("ended"),
        vec![holder],
        "the holder has committed"
    );

    // The lock is taken: another batch skips these runs and names them busy.
    let mut third = pool.begin().await.expect("begin");
    let again = status::lock(&mut third, &keys[..3], Some(now))
        .await
        .expect("lock");
    assert!(again.runs.is_empty());
    assert_eq!(again.busy.len(), 3);
}
