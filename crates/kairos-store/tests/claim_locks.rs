//! A claim keeps locked only the runs it takes. A run another round holds stays that
//! round's while the claim walks past it, even when that round commits the run's launch in
//! the middle of the walk. Otherwise the claim's round, open until its last wave, would hold
//! a launched run, and the run's status reports would wait for it.

use crate::support;

use std::time::Duration;

use chrono::TimeDelta;
use kairos_store::dispatch::{claim, ClaimScope};
use kairos_testkit::TestDb;
use support::{now, runs, schedules};

/// Runs due at once: enough that a claim's walk past them outlasts a commit.
const RUNS: i64 = 20_000;
/// Times the race is run.
const ATTEMPTS: usize = 5;

#[tokio::test]
async fn a_claim_keeps_no_lock_on_a_run_launched_while_it_walked_past() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let now = now();
    schedules(&pool, RUNS).await;
    runs(&pool, RUNS, now - TimeDelta::seconds(1), "PENDING").await;
    for attempt in 1..=ATTEMPTS {
        // A round holds every due run and has recorded its launch, not committed yet.
        let mut round = pool.begin().await.expect("begin");
        let recorded =
            sqlx::query("update schedule_runs set status = 'ENQUEUED' where status = 'PENDING'")
                .execute(&mut *round)
                .await
                .expect("record")
                .rows_affected();
        assert_eq!(recorded, RUNS as u64);
        // Another round's claim walks past them while the first commits.
        let claiming = tokio::spawn({
            let pool = pool.clone();
            async move {
                let mut tx = pool.begin().await.expect("begin");
                let taken = claim(&mut tx, now, now, 300.0, 100, &ClaimScope::default())
                    .await
                    .expect("claim");
                (tx, taken)
            }
        });
        tokio::time::sleep(Duration::from_millis(5 * attempt as u64)).await;
        round.commit().await.expect("commit");
        let (claimer, taken) = claiming.await.expect("claim task");
        assert!(
            taken.is_empty(),
            "attempt {attempt}: nothing was due unheld"
        );

        // With the claim's transaction still open, every launched run is free to take.
        let mut reader = pool.begin().await.expect("begin");
        let free: i64 = sqlx::query_scalar(
            "select count(*) from (select 1 from schedule_runs where status = 'ENQUEUED' \
               for update skip locked) as free",
        )
        .fetch_one(&mut *reader)
        .await
        .expect("free");
        reader.rollback().await.expect("rollback");
        claimer.rollback().await.expect("rollback");
        assert_eq!(
            free,
            RUNS,
            "attempt {attempt}: the claim kept {} launched runs locked",
            RUNS - free
        );
        sqlx::query("update schedule_runs set status = 'PENDING'")
            .execute(&pool)
            .await
            .expect("reset");
    }
}
