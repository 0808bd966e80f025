//! The metrics say what happened: known work driven through the real dispatcher, planner,
//! sweep and status intake (real PostgreSQL, real nats-server), then the rendered
//! Prometheus text compared with the database. Each test sets its own recorder on its
//! (single-threaded) runtime, so tests running in parallel never see each other's counts.

use crate::dispatcher_support;
use crate::planner_support;

use kairos_testkit::sqlx;
use kairos_testkit::TestDb;
use std::time::Duration;

use dispatcher_support::{config, drain, key, nats, run, schedule, workflow};
use kairos_launcher::status::StatusMessage;
use kairos_store::PgPool;
use kairos_testkit::prometheus::sample;
use kairos_worker::dispatcher::Dispatcher;
use kairos_worker::intake::Intake;
use kairos_worker::metrics::{self as m, refresh_backlog};
use planner_support::{drain as drain_planner, input, planner, upsert};

fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    sample(text, name, labels).unwrap_or_else(|| panic!("{name}{labels:?} missing in:\n{text}"))
}

/// A status message as an executor publishes it on the NATS status subject.
fn event(key: &str, status: &str) -> StatusMessage {
    let body = serde_json::json!({"idempotency_key": key, "status": status,
        "executor_id": "exec-1"});
    StatusMessage {
        subject: format!("kairos.status.{key}"),
        key: key.to_string(),
        payload: body.to_string().into_bytes(),
        traceparent: None,
        deliveries: 1,
    }
}

/// A PENDING run of `schedule_id` for workflow `wf` at `version`, overdue by `ago_s`.
async fn run_of_version(pool: &PgPool, key: &str, schedule_id: &str, version: i32, ago_s: f64) {
    sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, workflow_id, \
         version, user_id) values ($1, $2, date_trunc('second', now() - make_interval(secs => $4)), \
         now() - make_interval(secs => $4), 'wf', $3, 'u')",
    )
    .bind(key)
    .bind(schedule_id)
    .bind(version)
    .bind(ago_s)
    .execute(pool)
    .await
    .expect("insert run");
}

/// Seven runs enqueued (5 `allow`, the first of 3 `skip`, the first of 2 `queue`), two
/// skipped by overlap, one queued, one past the launch deadline, one whose workflow is
/// missing, one timed out by the sweep, and four status events: every counter and the
/// drift histogram agree with the rows.
#[tokio::test]
async fn dispatcher_metrics_match_the_runs() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let recorder = m::recorder();
    let handle = recorder.handle();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (_server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "free", "allow", None).await;
    schedule(&pool, "excl", "skip", None).await;
    schedule(&pool, "fifo", "queue", None).await;
    schedule(&pool, "slow", "allow", Some(1)).await;
    for n in 0..5 {
        run(&pool, &key(n), "free", -1.0 - n as f64 / 10.0).await;
    }
    for n in 0..3 {
        run(&pool, &key(10 + n), "excl", -3.0 + n as f64).await;
    }
    for n in 0..2 {
        run(&pool, &key(20 + n), "fifo", -2.0 + n as f64 / 2.0).await;
    }
    run(&pool, &key(30), "free", -400.0).await; // past the 300 s launch deadline
    run_of_version(&pool, &key(31), "free", 9, 1.0).await; // no workflow wf v9
                                                           // An enqueued run of `slow` (max_run_seconds 1) published 10 s ago: the sweep's.
    sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
         published_at, workflow_id, version, user_id) \
         values ($1, 'slow', date_trunc('second', now()) - interval '11 s', \
           now() - interval '11 s', 'ENQUEUED', \
           now() - interval '10 s', 'wf', 1, 'u')",
    )
    .bind(key(40))
    .execute(&pool)
    .await
    .expect("insert enqueued run");

    let dispatcher = Dispatcher::new(pool.clone(), launcher, config());
    let rounds = drain(&dispatcher).await;
    let (timed_out, _) = dispatcher_support::sweeper(&pool, dispatcher.launcher())
        .sweep()
        .await
        .expect("sweep");
    assert_eq!(timed_out, 1);
    let intake = Intake::new(pool.clone());
    for status in [
        "STARTED", // applied
        "STARTED", // unchanged: a repeat
        "SUCCESS", // applied
    ] {
        intake.take_messages(vec![event(&key(0), status)]).await;
    }
    intake
        .take_messages(vec![event("no-such-run", "FAILED")])
        .await;

    let text = handle.render();
    assert_eq!(value(&text, m::RUNS_EMITTED, &[]), 7.0);
    assert_eq!(value(&text, m::RUNS_SKIPPED, &[("reason", "overlap")]), 2.0);
    assert_eq!(value(&text, m::RUNS_QUEUED, &[]), 1.0);
    let failed = |reason| value(&text, m::RUNS_FAILED_LAUNCH, &[("reason", reason)]);
    assert_eq!(failed("deadline"), 1.0);
    assert_eq!(failed("workflow_missing"), 1.0);
    assert_eq!(
        sample(&text, m::RUNS_FAILED_LAUNCH, &[("reason", "retryable")]),
        None
    );
    assert_eq!(
        value(&text, m::RUNS_TIMED_OUT, &[("reason", "max_run_seconds")]),
        1.0
    );
    let status = |status, outcome| {
        value(
            &text,
            m::STATUS_EVENTS,
            &[("status", status), ("outcome", outcome)],
        )
    };
    assert_eq!(status("STARTED", "applied"), 1.0);
    assert_eq!(status("STARTED", "unchanged"), 1.0);
    assert_eq!(status("SUCCESS", "applied"), 1.0);
    assert_eq!(status("FAILED", "unknown_run"), 1.0);
    assert_eq!(
        value(&text, "kairos_dispatcher_round_duration_seconds_count", &[]),
        rounds as f64
    );

    // The drift histogram holds exactly the seven enqueued ticks, each from its own
    // acknowledgement: no earlier than the database's published_at (when its wave was let
    // out, just before the publish) and within the local server's round trip of it.
    let (count, sum): (i64, f64) = sqlx::query_as(
        "select count(*), sum(extract(epoch from published_at - run_at))::float8 \
         from schedule_runs where published_at is not null and idempotency_key <> $1",
    )
    .bind(key(40))
    .fetch_one(&pool)
    .await
    .expect("drift of the rows");
    assert_eq!(count, 7);
    let drift = |suffix: &str, labels: &[(&str, &str)]| {
        value(&text, &format!("{}{suffix}", m::FIRE_DRIFT), labels)
    };
    assert_eq!(drift("_count", &[]), 7.0);
    let observed = drift("_sum", &[]);
    assert!(
        observed >= sum - 1e-6 && observed - sum < 7.0,
        "drift sum {observed} against published_at - run_at {sum}"
    );
    // Every tick was 1 to 3 s overdue when dispatched: none under 0.5 s, all under 10 s.
    assert_eq!(drift("_bucket", &[("le", "0.5")]), 0.0);
    assert_eq!(drift("_bucket", &[("le", "10")]), 7.0);
}

/// NATS down: the round's launches count as `retryable` failures, nothing as emitted, and
/// the backlog gauges show the due runs still waiting.
#[tokio::test]
async fn outage_counts_retryable_failures_and_backlog() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let recorder = m::recorder();
    let handle = recorder.handle();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (mut server, launcher) = nats().await;
    workflow(&pool).await;
    schedule(&pool, "free", "allow", None).await;
    for n in 0..4 {
        run(&pool, &key(n), "free", -30.0 + n as f64).await;
    }
    run(&pool, &key(9), "free", 600.0).await; // not due: not in the outbox gauge
    server.stop();
    let mut config = config();
    config.launch_timeout = Duration::from_secs(2);
    let dispatcher = Dispatcher::new(pool.clone(), launcher, config);
    let round = dispatcher.round().await.expect("round while nats is down");
    assert_eq!((round.retry, round.enqueued), (4, 0));
    let backlog = refresh_backlog(&pool, Duration::from_secs(60))
        .await
        .expect("backlog");

    let text = handle.render();
    assert_eq!(
        value(&text, m::RUNS_FAILED_LAUNCH, &[("reason", "retryable")]),
        4.0
    );
    assert_eq!(sample(&text, m::RUNS_EMITTED, &[]), None);
    assert_eq!(value(&text, m::OUTBOX_PENDING, &[]), 4.0);
    let oldest = value(&text, m::OUTBOX_OLDEST, &[]);
    assert_eq!(oldest, backlog.oldest_seconds);
    assert!((30.0..60.0).contains(&oldest), "oldest {oldest}");
    // `free` has next_run_at NULL (written by hand): no schedule is due for planning.
    assert_eq!(value(&text, m::SCHEDULES_DUE, &[]), 0.0);
}

/// The planner's passes: missed ticks (catch-up `none`) counted as skipped `missed`, runs
/// written as planned, one duration sample per pass; both equal to what the rows say.
#[tokio::test]
async fn planner_metrics_match_missed_and_planned() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let recorder = m::recorder();
    let handle = recorder.handle();
    let _local = metrics::set_default_local_recorder(&recorder);
    upsert(&pool, "2026-03-01T10:00:00Z", input("behind", "* * * * *")).await;
    let mut catching_up = input("catching-up", "*/5 * * * *");
    catching_up.catchup_policy = Some("fire_immediately".into());
    upsert(&pool, "2026-03-01T10:00:00Z", catching_up).await;
    // An hour later: the ticks from 10:00 up to 10:59 are past the 60 s grace, so about 59
    // minutely ones are missed and the twelve five-minutely ones 10:00 ... 10:55 caught up.
    let reports = drain_planner(&planner(&pool, "2026-03-01T11:00:30Z")).await;

    let text = handle.render();
    let (rows, missed): (i64, i64) = sqlx::query_as(
        "select (select count(*) from schedule_runs), \
                (select sum(missed_ticks)::int8 from schedules)",
    )
    .fetch_one(&pool)
    .await
    .expect("rows");
    assert!(missed >= 58, "minutely ticks missed: {missed}");
    assert_eq!(
        value(&text, m::RUNS_SKIPPED, &[("reason", "missed")]),
        missed as f64
    );
    assert_eq!(value(&text, m::RUNS_PLANNED, &[]), rows as f64);
    let caught_up: u64 = reports.iter().map(|r| r.caught_up).sum();
    assert_eq!(caught_up, 12, "five-minutely ticks caught up");
    assert_eq!(
        value(&text, "kairos_planner_pass_duration_seconds_count", &[]),
        reports.len() as f64
    );
}

/// Bug: a labelled counter appeared in `/metrics` only after its first event, so `rate()`
/// and alerts on it saw nothing until the first failure. After `zero()` every counter of a
/// fixed label set is exported at 0.
#[test]
fn every_labelled_counter_is_exported_at_zero_from_the_start() {
    let recorder = m::recorder();
    let handle = recorder.handle();
    let _local = metrics::set_default_local_recorder(&recorder);
    assert_eq!(
        sample(
            &handle.render(),
            m::RUNS_FAILED_LAUNCH,
            &[("reason", "deadline")]
        ),
        None,
        "nothing is exported before zero()"
    );
    m::zero();
    let text = handle.render();
    for reason in m::LaunchFailure::ALL {
        assert_eq!(
            value(&text, m::RUNS_FAILED_LAUNCH, &[("reason", reason.as_str())]),
            0.0
        );
    }
    for reason in m::SkipReason::ALL {
        assert_eq!(
            value(&text, m::RUNS_SKIPPED, &[("reason", reason.as_str())]),
            0.0
        );
    }
    for status in [
        "STARTED",
        "SUCCESS",
        "FAILED",
        "HEARTBEAT",
        m::UNKNOWN_STATUS,
    ] {
        for outcome in m::StatusOutcome::ALL {
            let labels = [("status", status), ("outcome", outcome.as_str())];
            assert_eq!(value(&text, m::STATUS_EVENTS, &labels), 0.0);
        }
    }
    for reason in m::TimeoutReason::ALL {
        let labels = [("reason", reason.as_str())];
        assert_eq!(value(&text, m::RUNS_TIMED_OUT, &labels), 0.0);
    }
    for name in [
        m::RUNS_PLANNED,
        m::RUNS_EMITTED,
        m::RUNS_QUEUED,
        m::RUN_RETRIES,
        m::RUNS_DEAD_LETTERED,
    ] {
        assert_eq!(value(&text, name, &[]), 0.0);
    }
}
