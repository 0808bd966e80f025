//! The cancel outbox (`run_cancels`) holds exactly the `CANCELLING` runs, kept by a trigger
//! as runs enter and leave that status, and the two cancel sweeps find their runs there
//! (`sweep_plans` shows that they then do not scan the in-flight index).

use crate::support;

use chrono::TimeDelta;
use kairos_store::cancel::{self, Cancel};
use kairos_testkit::TestDb;
use sqlx::PgPool;
use support::{key_of, now, schedules, stored_run};

/// The outbox, as (key, sent).
async fn outbox(pool: &PgPool) -> Vec<(String, bool)> {
    sqlx::query_as(
        "select idempotency_key, sent_at is not null from run_cancels order by idempotency_key",
    )
    .fetch_all(pool)
    .await
    .expect("outbox")
}

#[tokio::test]
async fn the_outbox_holds_exactly_the_cancelling_runs() {
    let db = TestDb::new().await;
    let pool = db.pool();
    schedules(&pool, 4).await;
    for schedule in ["s1", "s2", "s3", "s4"] {
        stored_run(&pool, schedule, now(), "ENQUEUED").await;
    }
    let [k1, k2, k3, k4] = [
        key_of(&pool, "s1").await,
        key_of(&pool, "s2").await,
        key_of(&pool, "s3").await,
        key_of(&pool, "s4").await,
    ];
    let mut conn = pool.acquire().await.expect("connection");
    for key in [&k1, &k2, &k3, &k4] {
        let done = cancel::request(&mut conn, key, "test", None)
            .await
            .expect("cancel");
        assert!(matches!(done, Cancel::Cancelling(_)), "{done:?}");
    }
    let mut expected: Vec<(String, bool)> = [&k1, &k2, &k3, &k4].map(|k| (k.clone(), false)).into();
    expected.sort();
    assert_eq!(outbox(&pool).await, expected);

    // Sent: the outbox says so, and the next sweep does not send it again.
    let mut tx = pool.begin().await.expect("begin");
    let unsent = cancel::unsent(&mut tx, 10).await.expect("unsent");
    assert_eq!(unsent.len(), 4);
    cancel::mark_sent(&mut tx, std::slice::from_ref(&k1), now())
        .await
        .expect("sent");
    tx.commit().await.expect("commit");
    let mut tx = pool.begin().await.expect("begin");
    let unsent: Vec<String> = cancel::unsent(&mut tx, 10)
        .await
        .expect("unsent")
        .into_iter()
        .map(|run| run.idempotency_key)
        .collect();
    tx.rollback().await.expect("rollback");
    assert!(!unsent.contains(&k1) && unsent.len() == 3, "{unsent:?}");
    assert!(outbox(&pool).await.contains(&(k1.clone(), true)));

    // A run leaves CANCELLING by a report, by the time-out, or by being deleted.
    sqlx::query("update schedule_runs set status = 'CANCELLED' where idempotency_key = $1")
        .bind(&k2)
        .execute(&pool)
        .await
        .expect("reported");
    sqlx::query("delete from schedule_runs where idempotency_key = $1")
        .bind(&k3)
        .execute(&pool)
        .await
        .expect("deleted");
    let mut tx = pool.begin().await.expect("begin");
    let timed_out = cancel::time_out(&mut tx, now() + TimeDelta::hours(1), 60.0)
        .await
        .expect("time out");
    tx.commit().await.expect("commit");
    let mut rest = vec![k1.clone(), k4.clone()];
    rest.sort();
    let mut timed_out_sorted = timed_out.clone();
    timed_out_sorted.sort();
    assert_eq!(timed_out_sorted, rest, "the two still CANCELLING time out");
    assert_eq!(outbox(&pool).await, Vec::new());
}
