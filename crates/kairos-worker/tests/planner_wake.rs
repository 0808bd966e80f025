//! The planner wakes the dispatchers only for runs due soon: runs written at the end of its
//! lookahead are claimed in time by the dispatchers' own pace, and a wake-up for them would
//! make every dispatcher claim once more per pass.

use crate::planner_support;

use std::time::Duration as StdDuration;

use chrono::Duration;
use kairos_store::wakeups::{Wakeups, RUNS_CHANNEL};
use kairos_testkit::TestDb;
use kairos_worker::planner::{Planner, PlannerConfig};
use planner_support::{config, input, ts, upsert};

/// Whether a dispatcher wake-up arrives within half a second.
async fn woken(wakeups: &mut Wakeups) -> bool {
    tokio::time::timeout(StdDuration::from_millis(500), wakeups.next())
        .await
        .is_ok_and(|next| next.is_ok())
}

#[tokio::test]
async fn a_pass_wakes_the_dispatchers_only_for_a_run_due_within_wake_within() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let now = "2030-01-01T10:01:30Z";
    let planner = Planner::new(
        pool.clone(),
        PlannerConfig {
            lookahead: Duration::hours(1),
            wake_within: Duration::seconds(60),
            ..config(Some(ts(now)))
        },
    );
    let mut wakeups = Wakeups::listen(&pool, RUNS_CHANNEL).await.expect("listen");

    upsert(&pool, now, input("every-ten", "*/10 * * * *")).await;
    let report = planner.pass().await.expect("pass");
    assert!(
        report.inserted > 0,
        "runs 10:10 … 11:00 written: {report:?}"
    );
    assert!(
        !woken(&mut wakeups).await,
        "the first run is due 8.5 minutes on: no wake-up"
    );

    upsert(&pool, now, input("every-minute", "* * * * *")).await;
    let report = planner.pass().await.expect("pass");
    assert!(report.inserted > 0, "{report:?}");
    assert!(
        woken(&mut wakeups).await,
        "a run due at 10:02:00, 30 s on, wakes the dispatchers"
    );
}
