//! `dispatch::next_due_in`: how long until the next run waiting for its launch, and `None`
//! when no run waits at all. An idle dispatcher sleeps on this answer; a "due now" with
//! nothing due made it claim every few milliseconds.

use crate::support;

use std::time::Duration;

use chrono::{DurationRound, TimeDelta, Utc};
use kairos_store::dispatch::next_due_in;
use kairos_testkit::TestDb;
use support::{schedules, stored_run};

#[tokio::test]
async fn nothing_waiting_is_none_not_due_now() {
    let db = TestDb::new().await;
    let pool = db.pool();
    schedules(&pool, 3).await;
    let now = Utc::now()
        .duration_trunc(TimeDelta::seconds(1))
        .expect("whole second");
    assert_eq!(
        next_due_in(&pool, Some(now), None).await.expect("read"),
        None
    );

    // A run already published is not waiting; nor is one due before `after`.
    stored_run(&pool, "s1", now + TimeDelta::seconds(30), "ENQUEUED").await;
    stored_run(&pool, "s2", now + TimeDelta::seconds(10), "PENDING").await;
    assert_eq!(
        next_due_in(&pool, Some(now), Some(now + TimeDelta::seconds(20)))
            .await
            .expect("read"),
        None,
        "no run waits past `after`"
    );

    assert_eq!(
        next_due_in(&pool, Some(now), None).await.expect("read"),
        Some(Duration::from_secs(10))
    );
    // One already due is due now, never a negative wait.
    stored_run(&pool, "s3", now - TimeDelta::seconds(5), "RETRYING").await;
    assert_eq!(
        next_due_in(&pool, Some(now), None).await.expect("read"),
        Some(Duration::ZERO)
    );
}
