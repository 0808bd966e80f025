//! The batched status intake on real PostgreSQL: reports about one run in one batch apply
//! in their order, a refused or failing report fails alone, a run another transaction
//! holds is not waited for (its report applies once the holder commits), and two runs of
//! one exclusive schedule in one batch cannot both become in flight.

use crate::dispatcher_support;

use std::time::Duration;

use dispatcher_support::{field, key, run, schedule, workflow};
use kairos_core::{Reported, RunStatus};
use kairos_store::PgPool;
use kairos_testkit::{sqlx, TestDb};
use kairos_worker::intake::{Applied, StatusReport};
use kairos_worker::intake::{Intake, Item};

fn report(status: Reported, executor: &str) -> StatusReport {
    StatusReport {
        status,
        attempt: None,
        retryable: None,
        run_id: Some(format!("run-of-{executor}")),
        executor_id: Some(executor.into()),
        error: (status == Reported::Failed).then(|| "boom".to_string()),
        log_url: None,
        output: None,
    }
}

fn item(n: u64, status: Reported, executor: &str) -> Item {
    Item {
        key: key(n),
        report: report(status, executor),
    }
}

/// Run `key(n)` of schedule `schedule_id`, due a second ago and recorded as published.
async fn published(pool: &PgPool, n: u64, schedule_id: &str) {
    run(pool, &key(n), schedule_id, -1.0).await;
    sqlx::query(
        "update schedule_runs r set status = 'ENQUEUED', published_at = now(), \
           exclusive = (select s.overlap_policy <> 'allow' from schedules s \
                        where s.schedule_id = r.schedule_id) \
         where idempotency_key = $1",
    )
    .bind(key(n))
    .execute(pool)
    .await
    .expect("publish");
}

async fn status_of(pool: &PgPool, n: u64) -> RunStatus {
    let status = field(pool, &key(n), "status").await.expect("a run");
    status.parse().expect("a run status")
}

fn moved_to(answer: &Result<Applied, kairos_worker::intake::Error>) -> Option<RunStatus> {
    match answer {
        Ok(Applied::Moved(run)) => Some(run.status),
        _ => None,
    }
}

#[tokio::test]
async fn reports_about_one_run_in_one_batch_apply_in_their_order() {
    let db = TestDb::new().await;
    let pool = db.pool();
    workflow(&pool).await;
    schedule(&pool, "s", "allow", None).await;
    published(&pool, 1, "s").await;
    let intake = Intake::new(pool.clone());

    let answers = intake
        .report_many(vec![
            item(1, Reported::Started, "e1"),
            item(1, Reported::Heartbeat, "e1"),
            item(1, Reported::Success, "e1"),
            item(1, Reported::Started, "e1"),
        ])
        .await;
    let moved: Vec<Option<RunStatus>> = answers.iter().map(moved_to).collect();
    assert_eq!(
        moved,
        [
            Some(RunStatus::Started),
            Some(RunStatus::Started),
            Some(RunStatus::Success),
            None
        ]
    );
    assert!(
        matches!(answers[3], Ok(Applied::Unchanged(ref run)) if run.status == RunStatus::Success)
    );
    assert_eq!(status_of(&pool, 1).await, RunStatus::Success);
    for column in ["started_at", "finished_at", "heartbeat_at"] {
        assert!(field(&pool, &key(1), column).await.is_some(), "{column}");
    }
    let history = kairos_store::attempts::history(&pool, &key(1))
        .await
        .expect("history");
    assert_eq!(
        history.len(),
        1,
        "one finished attempt, listed once: {history:?}"
    );
    assert_eq!(history[0].status, RunStatus::Success);
    let finished_at: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("select finished_at from schedule_runs where idempotency_key = $1")
            .bind(key(1))
            .fetch_one(&pool)
            .await
            .expect("finished_at");
    assert_eq!(
        Some(history[0].finished_at),
        finished_at,
        "the SUCCESS attempt is the run row's own"
    );
    let written: i64 =
        sqlx::query_scalar("select count(*) from run_attempts where idempotency_key = $1")
            .bind(key(1))
            .fetch_one(&pool)
            .await
            .expect("attempts");
    assert_eq!(
        written, 0,
        "the run row keeps its SUCCESS attempt, written once"
    );
}

#[tokio::test]
async fn a_refused_report_is_answered_alone_and_the_rest_of_its_batch_applies() {
    let db = TestDb::new().await;
    let pool = db.pool();
    workflow(&pool).await;
    schedule(&pool, "s", "allow", None).await;
    for n in 1..=3 {
        published(&pool, n, "s").await;
    }
    run(&pool, &key(4), "s", 60.0).await; // not due: cannot have been published
    let intake = Intake::new(pool.clone());
    intake
        .report(&key(2), &report(Reported::Started, "owner"))
        .await
        .expect("owned");

    let answers = intake
        .report_many(vec![
            item(1, Reported::Success, "e1"),
            item(2, Reported::Success, "intruder"),
            item(99, Reported::Started, "e1"),
            item(4, Reported::Started, "e1"),
            item(3, Reported::Failed, "e1"),
        ])
        .await;
    assert_eq!(moved_to(&answers[0]), Some(RunStatus::Success));
    assert!(
        matches!(answers[1], Ok(Applied::Conflict { ref owner, .. }) if owner == "owner"),
        "{:?}",
        answers[1]
    );
    assert!(matches!(answers[2], Ok(Applied::NotFound)));
    assert!(matches!(answers[3], Ok(Applied::Unpublished(_))));
    assert_eq!(moved_to(&answers[4]), Some(RunStatus::Failed));
    assert_eq!(status_of(&pool, 2).await, RunStatus::Started);
    assert_eq!(status_of(&pool, 4).await, RunStatus::Pending);
    assert!(
        field(&pool, &key(3), "dead_lettered_at").await.is_some(),
        "one attempt allowed: the failure is a dead letter"
    );
}

#[tokio::test]
async fn a_report_the_server_refuses_fails_alone() {
    let db = TestDb::new().await;
    let pool = db.pool();
    workflow(&pool).await;
    schedule(&pool, "s", "allow", None).await;
    for n in 1..=5 {
        published(&pool, n, "s").await;
    }
    // A row the server will not take a final status for: the batch it is in fails as a
    // whole until it is split down to that report.
    sqlx::raw_sql(&format!(
        "create function refuse_poison() returns trigger language plpgsql as $$ \
         begin raise exception 'poison run'; end $$; \
         create trigger poison before update on schedule_runs for each row \
         when (new.idempotency_key = '{}' and new.status = 'SUCCESS') \
         execute function refuse_poison();",
        key(3)
    ))
    .execute(&pool)
    .await
    .expect("poison trigger");
    let intake = Intake::new(pool.clone());

    let answers = intake
        .report_many((1..=5).map(|n| item(n, Reported::Success, "e1")).collect())
        .await;
    for (n, answer) in (1..=5).zip(&answers) {
        if n == 3 {
            assert!(
                matches!(answer, Err(kairos_worker::intake::Error::Batch(_))),
                "{answer:?}"
            );
            assert_eq!(status_of(&pool, n).await, RunStatus::Enqueued);
        } else {
            assert_eq!(moved_to(answer), Some(RunStatus::Success), "run {n}");
            assert_eq!(status_of(&pool, n).await, RunStatus::Success);
        }
    }
}

#[tokio::test]
async fn a_held_run_is_not_waited_for_and_applies_once_released() {
    let db = TestDb::new().await;
    let pool = db.pool();
    workflow(&pool).await;
    schedule(&pool, "s", "allow", None).await;
    published(&pool, 1, "s").await;
    published(&pool, 2, "s").await;
    // Another transaction (a dispatcher's claim, say) holds run 1.
    let mut holder = pool.begin().await.expect("begin");
    sqlx::query("select 1 from schedule_runs where idempotency_key = $1 for update")
        .bind(key(1))
        .execute(&mut *holder)
        .await
        .expect("hold run 1");
    let intake = Intake::new(pool.clone());

    let held = tokio::spawn({
        let intake = intake.clone();
        async move {
            intake
                .report(&key(1), &report(Reported::Started, "e1"))
                .await
        }
    });
    let free = tokio::time::timeout(
        Duration::from_secs(5),
        intake.report(&key(2), &report(Reported::Started, "e1")),
    )
    .await
    .expect("a report about a free run does not wait for a held one");
    assert_eq!(moved_to(&free), Some(RunStatus::Started));
    assert!(!held.is_finished(), "run 1 is still held");
    assert_eq!(status_of(&pool, 1).await, RunStatus::Enqueued);

    holder.commit().await.expect("release");
    let held = tokio::time::timeout(Duration::from_secs(5), held)
        .await
        .expect("applied once released")
        .expect("task");
    assert_eq!(moved_to(&held), Some(RunStatus::Started));
}

#[tokio::test]
async fn two_runs_of_one_exclusive_schedule_in_one_batch_cannot_both_be_in_flight() {
    let db = TestDb::new().await;
    let pool = db.pool();
    workflow(&pool).await;
    schedule(&pool, "x", "skip", None).await;
    // Two due PENDING runs whose dispatchers died after the PubAck: the first report makes
    // one in flight, and the second must then be refused, in the same batch.
    run(&pool, &key(1), "x", -2.0).await;
    run(&pool, &key(2), "x", -1.0).await;
    // One batch at a time, so that all four reports are decided in one batch. (Written in
    // two batches side by side, the second to commit a run in flight breaks the schedule's
    // slot and is tried again, then refused the same way.)
    let intake = Intake::with_batches(pool.clone(), 1);

    let answers = intake
        .report_many(vec![
            item(1, Reported::Started, "e1"),
            item(2, Reported::Started, "e2"),
            item(1, Reported::Success, "e1"),
            item(2, Reported::Started, "e2"),
        ])
        .await;
    assert_eq!(moved_to(&answers[0]), Some(RunStatus::Started));
    assert!(
        matches!(answers[1], Ok(Applied::Blocked { ref in_flight, .. }) if *in_flight == key(1)),
        "{:?}",
        answers[1]
    );
    assert_eq!(moved_to(&answers[2]), Some(RunStatus::Success));
    // Run 1 ended, so the schedule is free again for run 2, still in the same batch.
    assert_eq!(moved_to(&answers[3]), Some(RunStatus::Started));
    let holder: Option<String> =
        sqlx::query_scalar("select idempotency_key from runs_in_flight where schedule_id = 'x'")
            .fetch_optional(&pool)
            .await
            .expect("runs_in_flight");
    assert_eq!(holder, Some(key(2)));
}

/// Reports about runs of one exclusive schedule, spread over batches written side by side:
/// exactly one of the runs is in flight, whichever batch commits first.
#[tokio::test]
async fn batches_side_by_side_never_put_two_runs_of_one_exclusive_schedule_in_flight() {
    let db = TestDb::new().await;
    let pool = db.pool();
    workflow(&pool).await;
    schedule(&pool, "x", "skip", None).await;
    for n in 1..=12 {
        run(&pool, &key(n), "x", -(n as f64)).await;
    }
    let intake = Intake::with_batches(pool.clone(), 4);

    let answers = intake
        .report_many((1..=12).map(|n| item(n, Reported::Started, "e")).collect())
        .await;
    let started = answers
        .iter()
        .filter(|answer| moved_to(answer) == Some(RunStatus::Started))
        .count();
    assert_eq!(
        started, 1,
        "one run starts, the others are blocked: {answers:?}"
    );
    let in_flight: i64 = sqlx::query_scalar(
        "select count(*) from schedule_runs where schedule_id = 'x' and status = 'STARTED'",
    )
    .fetch_one(&pool)
    .await
    .expect("count");
    assert_eq!(in_flight as usize, started, "{answers:?}");
    let slots: i64 =
        sqlx::query_scalar("select count(*) from runs_in_flight where schedule_id = 'x'")
            .fetch_one(&pool)
            .await
            .expect("runs_in_flight");
    assert_eq!(slots as usize, started);
}

#[tokio::test]
async fn a_failure_with_attempts_left_retries_and_the_next_report_waits_for_the_attempt() {
    let db = TestDb::new().await;
    let pool = db.pool();
    workflow(&pool).await;
    schedule(&pool, "s", "allow", None).await;
    sqlx::query("update schedules set max_attempts = 2, retry_intervals_s = '{60}'")
        .execute(&pool)
        .await
        .expect("retry policy");
    published(&pool, 1, "s").await;
    let intake = Intake::new(pool.clone());

    let answers = intake
        .report_many(vec![
            item(1, Reported::Started, "e1"),
            item(1, Reported::Failed, "e1"),
            item(1, Reported::Success, "e1"),
        ])
        .await;
    assert_eq!(moved_to(&answers[1]), Some(RunStatus::Retrying));
    assert!(
        matches!(answers[2], Ok(Applied::Unpublished(_))),
        "attempt 2 is not out yet: {:?}",
        answers[2]
    );
    assert_eq!(status_of(&pool, 1).await, RunStatus::Retrying);
    assert_eq!(field(&pool, &key(1), "attempt").await.as_deref(), Some("2"));
}
