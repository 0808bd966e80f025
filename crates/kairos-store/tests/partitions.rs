//! `schedule_runs` partitioned by day of `run_at` (migration `20260116000000_partitions.sql`):
//! what the database still enforces across partitions (one row per key, the key ledger, one
//! run in flight per exclusive schedule), the partitions made ahead, retention's whole-day
//! drops and their fallback, and the migration carrying existing rows over.

use kairos_testkit::TestDb;
use std::borrow::Cow;

use chrono::{DateTime, Duration, NaiveDate, Utc};
use kairos_core::{RunSource, RunStatus};
use kairos_store::dispatch::{self, ApiRun};
use kairos_store::partitions::{self, DayPartition};
use kairos_store::planning::{self, RunRows};
use kairos_store::retention::{self, RetentionRule};
use kairos_store::runs::{self, NewRun};
use sqlx::migrate::Migrator;
use sqlx::PgPool;

fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("rfc3339")
}

fn day(text: &str) -> NaiveDate {
    text.parse().expect("date")
}

fn tick_key(schedule_id: &str, run_at: DateTime<Utc>) -> String {
    kairos_core::RunKey::tick(schedule_id, run_at)
        .as_str()
        .to_string()
}

fn manual(key: &str, run_at: DateTime<Utc>) -> NewRun {
    NewRun {
        idempotency_key: key.to_string(),
        schedule_id: "s".into(),
        run_at,
        fire_at: run_at,
        status: RunStatus::Pending,
        source: RunSource::Manual,
        overlap: None,
        workflow_id: "w".into(),
        version: 1,
        user_id: "u".into(),
    }
}

/// Writes a run with every column that matters here; `exclusive` and `status` as given.
async fn put(
    pool: &PgPool,
    schedule_id: &str,
    run_at: DateTime<Utc>,
    status: &str,
    exclusive: bool,
) -> String {
    let key = tick_key(schedule_id, run_at);
    sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
           exclusive, workflow_id, version, user_id, created_at, updated_at) \
         values ($1, $2, $3, $3, $4, $5, 'w', 1, 'u', $3, $3)",
    )
    .bind(&key)
    .bind(schedule_id)
    .bind(run_at)
    .bind(status)
    .bind(exclusive)
    .execute(pool)
    .await
    .expect("insert run");
    key
}

async fn partition_of(pool: &PgPool, key: &str) -> String {
    sqlx::query_scalar(
        "select tableoid::regclass::text from schedule_runs where idempotency_key = $1",
    )
    .bind(key)
    .fetch_one(pool)
    .await
    .expect("partition of")
}

async fn count_where(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.expect(sql)
}

/// The days that have a partition, in order.
async fn days(pool: &PgPool) -> Vec<NaiveDate> {
    partitions::list(pool)
        .await
        .expect("list")
        .into_iter()
        .map(|p| p.day)
        .collect()
}
#[tokio::test]
async fn a_fresh_database_has_daily_partitions_a_default_and_every_index() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let today: NaiveDate = sqlx::query_scalar("select (now() at time zone 'UTC')::date")
        .fetch_one(&pool)
        .await
        .expect("today");
    let days = days(&pool).await;
    let expected: Vec<NaiveDate> = (0..=7).map(|n| today + chrono::Days::new(n)).collect();
    assert_eq!(days, expected);
    let default: Option<String> =
        sqlx::query_scalar("select to_regclass('schedule_runs_default')::text")
            .fetch_one(&pool)
            .await
            .expect("default");
    assert_eq!(default.as_deref(), Some("schedule_runs_default"));
    let mut indexes: Vec<String> = sqlx::query_scalar(
        "select indexname::text from pg_indexes where tablename = 'schedule_runs' order by 1",
    )
    .fetch_all(&pool)
    .await
    .expect("indexes");
    indexes.sort();
    assert_eq!(
        indexes,
        [
            "schedule_runs_claim",
            "schedule_runs_dead_letters",
            "schedule_runs_deadline_open",
            "schedule_runs_due",
            "schedule_runs_enqueued",
            "schedule_runs_in_flight",
            "schedule_runs_late",
            "schedule_runs_pkey",
            "schedule_runs_queued",
            "schedule_runs_recent",
            "schedule_runs_schedule",
        ]
    );
    // Every partition carries every index (11 each).
    let per_partition: Vec<i64> = sqlx::query_scalar(
        "select count(*) from pg_inherits i join pg_index x on x.indrelid = i.inhrelid \
         where i.inhparent = 'schedule_runs'::regclass group by i.inhrelid",
    )
    .fetch_all(&pool)
    .await
    .expect("partition indexes");
    assert_eq!(per_partition.len(), 9);
    assert!(per_partition.iter().all(|n| *n == 11), "{per_partition:?}");
    let one_in_flight: String = sqlx::query_scalar(
        "select conrelid::regclass::text from pg_constraint \
         where conname = 'schedule_runs_one_in_flight'",
    )
    .fetch_one(&pool)
    .await
    .expect("one in flight");
    assert_eq!(one_in_flight, "runs_in_flight");
}

#[tokio::test]
async fn one_row_per_tick_across_partitions() {
    let db = TestDb::new().await;
    let pool = db.pool();
    partitions::create_ahead(&pool, at("2030-01-01T00:00:00Z"), 2)
        .await
        .expect("partitions");
    let mut rows = RunRows::default();
    // One tick in a daily partition, one in the default (no partition for 2029).
    for run_at in [at("2030-01-02T10:00:00Z"), at("2029-06-01T10:00:00Z")] {
        rows.idempotency_keys.push(tick_key("s", run_at));
        rows.schedule_ids.push("s".into());
        rows.run_ats.push(run_at);
        rows.fire_ats.push(run_at);
        rows.workflow_ids.push("w".into());
        rows.versions.push(1);
        rows.user_ids.push("u".into());
    }
    let now = at("2030-01-01T00:00:00Z");
    let first = planning::insert_runs(&pool, &rows, RunSource::Schedule, None, now)
        .await
        .expect("first");
    let again = planning::insert_runs(&pool, &rows, RunSource::Backfill, None, now)
        .await
        .expect("again");
    assert_eq!((first, again), (2, 0));
    assert_eq!(runs::count(&pool).await.expect("count"), 2);
    assert_eq!(
        partition_of(&pool, &rows.idempotency_keys[0]).await,
        "schedule_runs_p20300102"
    );
    assert_eq!(
        partition_of(&pool, &rows.idempotency_keys[1]).await,
        "schedule_runs_default"
    );
    // Ticks never reach the ledger.
    assert_eq!(count_where(&pool, "select count(*) from run_keys").await, 0);
}

#[tokio::test]
async fn manual_api_and_chain_keys_stay_unique_whatever_their_run_at() {
    let db = TestDb::new().await;
    let pool = db.pool();
    partitions::create_ahead(&pool, at("2030-01-01T00:00:00Z"), 2)
        .await
        .expect("partitions");
    let (day1, day2) = (at("2030-01-01T08:00:00Z"), at("2030-01-02T08:00:00Z"));
    let key = kairos_core::RunKey::manual("s", "request-1")
        .as_str()
        .to_string();
    assert!(runs::insert(&pool, &manual(&key, day1), day1)
        .await
        .expect("first"));
    assert!(
        !runs::insert(&pool, &manual(&key, day2), day2)
            .await
            .expect("same key, another day"),
        "the ledger refuses the key in another partition"
    );
    let api = |scheduled_for| ApiRun {
        idempotency_key: "caller-key".into(),
        workflow_id: "w".into(),
        version: 1,
        user_id: "u".into(),
        scheduled_for,
    };
    assert!(dispatch::insert_api_run(&pool, &api(day1), day1)
        .await
        .expect("api"));
    assert!(!dispatch::insert_api_run(&pool, &api(day2), day2)
        .await
        .expect("api again"));
    let chain = "c".repeat(64);
    for run_at in [day1, day2] {
        sqlx::query(
            "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, source, \
               workflow_id, version, user_id) values ($1, 'child', $2, $2, 'chain', 'w', 1, 'u') \
             on conflict do nothing",
        )
        .bind(&chain)
        .bind(run_at)
        .execute(&pool)
        .await
        .expect("chain run");
    }
    assert_eq!(runs::count(&pool).await.expect("count"), 3);
    assert_eq!(count_where(&pool, "select count(*) from run_keys").await, 3);
    let stored = runs::get(&pool, &key).await.expect("get").expect("run");
    assert_eq!(stored.run_at, day1);
    // A deleted run frees its key (retention's row deletes go through the same trigger).
    sqlx::query("delete from schedule_runs where idempotency_key = $1")
        .bind(&key)
        .execute(&pool)
        .await
        .expect("delete");
    assert_eq!(count_where(&pool, "select count(*) from run_keys").await, 2);
    assert!(runs::insert(&pool, &manual(&key, day2), day2)
        .await
        .expect("a freed key"));
}

#[tokio::test]
async fn one_run_in_flight_per_exclusive_schedule_across_partitions() {
    let db = TestDb::new().await;
    let pool = db.pool();
    partitions::create_ahead(&pool, at("2030-01-01T00:00:00Z"), 2)
        .await
        .expect("partitions");
    let first = put(&pool, "s", at("2030-01-01T10:00:00Z"), "PENDING", true).await;
    let second = put(&pool, "s", at("2030-01-02T10:00:00Z"), "PENDING", true).await;
    assert_ne!(
        partition_of(&pool, &first).await,
        partition_of(&pool, &second).await
    );
    let moved = |key: String, status: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query("update schedule_runs set status = $2 where idempotency_key = $1")
                .bind(key)
                .bind(status)
                .execute(&pool)
                .await
        }
    };
    moved(first.clone(), "ENQUEUED").await.expect("first");
    for status in ["ENQUEUED", "STARTED"] {
        let refused = moved(second.clone(), status)
            .await
            .expect_err("a second run in flight");
        let sqlx::Error::Database(err) = refused else {
            panic!("{refused:?}");
        };
        assert_eq!(err.code().as_deref(), Some("23505"), "unique_violation");
        assert_eq!(err.constraint(), Some("schedule_runs_one_in_flight"));
    }
    // A non-exclusive run is not counted; the first run's end frees the schedule.
    put(&pool, "s", at("2030-01-02T11:00:00Z"), "STARTED", false).await;
    moved(first.clone(), "STARTED")
        .await
        .expect("still in flight");
    moved(first, "SUCCESS").await.expect("finished");
    moved(second.clone(), "STARTED")
        .await
        .expect("the schedule is free");
    let holder: String = sqlx::query_scalar("select idempotency_key from runs_in_flight")
        .fetch_one(&pool)
        .await
        .expect("holder");
    assert_eq!(holder, second);
}

#[tokio::test]
async fn partitions_ahead_are_idempotent_and_leave_days_in_default_alone() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let now = at("2030-01-01T12:00:00Z");
    // A run of Jan 4 before its partition exists: it lands in the default partition.
    let early = put(&pool, "s", at("2030-01-04T10:00:00Z"), "PENDING", false).await;
    let ahead = partitions::create_ahead(&pool, now, 4)
        .await
        .expect("ahead");
    assert_eq!(
        ahead.created,
        [
            day("2030-01-01"),
            day("2030-01-02"),
            day("2030-01-03"),
            day("2030-01-05")
        ]
    );
    assert_eq!(ahead.in_default, [day("2030-01-04")]);
    let again = partitions::create_ahead(&pool, now, 4)
        .await
        .expect("again");
    assert!(again.created.is_empty());
    assert_eq!(again.existing.len(), 4);
    assert_eq!(again.in_default, [day("2030-01-04")]);
    assert_eq!(partition_of(&pool, &early).await, "schedule_runs_default");
    let later = put(&pool, "s", at("2030-01-05T10:00:00Z"), "PENDING", false).await;
    assert_eq!(partition_of(&pool, &later).await, "schedule_runs_p20300105");
}

#[tokio::test]
async fn retention_drops_deletable_days_and_falls_back_to_row_deletes() {
    let db = TestDb::new().await;
    let pool = db.pool();
    partitions::create_ahead(&pool, at("2030-01-01T00:00:00Z"), 3)
        .await
        .expect("partitions");
    // Day 1: finished runs of `a` (a newer run of `a` exists), a manual run with its ledger
    // key, an attempt. Day 2: the only run of `b` (keep_last keeps it). Day 3: a STARTED run.
    // Day 4: a finished run updated recently. The default partition: an old finished run of
    // `a` and an old PENDING one.
    put(&pool, "a", at("2030-01-01T10:00:00Z"), "SUCCESS", false).await;
    let failed = put(&pool, "a", at("2030-01-01T11:00:00Z"), "FAILED", false).await;
    let key = kairos_core::RunKey::manual("a", "r").as_str().to_string();
    let mut manual_run = manual(&key, at("2030-01-01T12:00:00Z"));
    manual_run.schedule_id = "a".into();
    manual_run.status = RunStatus::Cancelled;
    runs::insert(&pool, &manual_run, at("2030-01-01T12:00:00Z"))
        .await
        .expect("manual");
    sqlx::query(
        "insert into run_attempts (idempotency_key, attempt, status, finished_at) \
         values ($1, 1, 'FAILED', '2030-01-01T11:00:00Z')",
    )
    .bind(&failed)
    .execute(&pool)
    .await
    .expect("attempt");
    put_logs(&pool, &failed).await;
    put(&pool, "b", at("2030-01-02T10:00:00Z"), "SUCCESS", false).await;
    put(&pool, "a", at("2030-01-03T10:00:00Z"), "STARTED", false).await;
    let recent = put(&pool, "a", at("2030-01-04T10:00:00Z"), "SUCCESS", false).await;
    sqlx::query("update schedule_runs set updated_at = $2 where idempotency_key = $1")
        .bind(&recent)
        .bind(at("2030-02-28T00:00:00Z"))
        .execute(&pool)
        .await
        .expect("recent change");
    let skipped = put(&pool, "a", at("2029-12-01T10:00:00Z"), "SKIPPED", false).await;
    put_logs(&pool, &skipped).await;
    put(&pool, "a", at("2029-12-01T11:00:00Z"), "PENDING", false).await;
    // The newest run of `a`, in the default partition (no partition for that day).
    put(&pool, "a", at("2030-02-25T10:00:00Z"), "SUCCESS", false).await;

    let rule = RetentionRule {
        older_than: at("2030-02-01T00:00:00Z"),
        keep_last: 1,
        limit: 100,
    };
    let dropped = partitions::drop_old(&pool, &rule).await.expect("drop");
    // The migration's days (today and after, all before 2030 and empty) go too.
    let in_2030 = |days: &[NaiveDate]| -> Vec<NaiveDate> {
        days.iter()
            .copied()
            .filter(|d| *d >= day("2030-01-01"))
            .collect()
    };
    assert_eq!(in_2030(&dropped.dropped), [day("2030-01-01")]);
    assert_eq!(
        dropped.kept,
        [day("2030-01-02"), day("2030-01-03"), day("2030-01-04")]
    );
    assert_eq!(dropped.runs, 3);
    let days = days(&pool).await;
    assert_eq!(
        days,
        [day("2030-01-02"), day("2030-01-03"), day("2030-01-04")],
        "only the kept days are left"
    );
    assert_eq!(count_where(&pool, "select count(*) from run_keys").await, 0);
    assert_eq!(
        count_where(&pool, "select count(*) from run_attempts").await,
        0
    );
    assert_eq!(
        count_where(&pool, "select count(*) from run_logs").await,
        1,
        "the dropped day's logs went with it"
    );
    // The fallback deletes what the rule allows in the kept days and the default partition:
    // only the old SKIPPED run (b's run is its newest, the STARTED run is in flight, the
    // recent change is not old, the PENDING run is unfinished).
    let deleted = retention::delete_batch(&pool, &rule).await.expect("rows");
    assert_eq!(deleted, 1);
    assert_eq!(runs::count(&pool).await.expect("count"), 5);
    assert_eq!(
        count_where(&pool, "select count(*) from run_logs").await,
        0,
        "a deleted run's logs go with it"
    );
    // Nothing more to drop: the kept days stay.
    let again = partitions::drop_old(&pool, &rule).await.expect("again");
    assert!(again.dropped.is_empty());
    assert_eq!(
        DayPartition::new(day("2030-01-02")).name(),
        "schedule_runs_p20300102"
    );
}

#[tokio::test]
async fn the_migration_carries_existing_rows_over() {
    let db = TestDb::empty().await;
    let pool = db.pool();
    let before = Migrator {
        migrations: Cow::Owned(
            kairos_store::MIGRATOR
                .iter()
                .filter(|m| m.version < 20260116000000)
                .cloned()
                .collect(),
        ),
        ignore_missing: false,
        locking: true,
        no_tx: false,
    };
    before.run(&pool).await.expect("earlier migrations");
    let now: DateTime<Utc> = sqlx::query_scalar("select date_trunc('second', now())")
        .fetch_one(&pool)
        .await
        .expect("now");
    // History, an exclusive run in flight, a manual run, an api run, a chained run.
    let old = put(&pool, "s", now - Duration::days(40), "SUCCESS", false).await;
    let flying = put(&pool, "s", now - Duration::hours(1), "STARTED", true).await;
    let planned = put(&pool, "s", now + Duration::days(2), "PENDING", false).await;
    let key = kairos_core::RunKey::manual("s", "r").as_str().to_string();
    runs::insert(&pool, &manual(&key, now), now)
        .await
        .expect("manual");
    let api = ApiRun {
        idempotency_key: "caller-key".into(),
        workflow_id: "w".into(),
        version: 1,
        user_id: "u".into(),
        scheduled_for: now,
    };
    dispatch::insert_api_run(&pool, &api, now)
        .await
        .expect("api");
    sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, source, \
           workflow_id, version, user_id, parent_key) \
         values ($1, 'child', $2, $2, 'chain', 'w', 1, 'u', $3)",
    )
    .bind("c".repeat(64))
    .bind(now)
    .bind(&old)
    .execute(&pool)
    .await
    .expect("chain");
    let rows_before: Vec<(String, DateTime<Utc>, String, bool)> = sqlx::query_as(
        "select idempotency_key, run_at, status, exclusive from schedule_runs order by 1",
    )
    .fetch_all(&pool)
    .await
    .expect("before");

    kairos_store::migrate(&pool).await.expect("partitions");

    let rows_after: Vec<(String, DateTime<Utc>, String, bool)> = sqlx::query_as(
        "select idempotency_key, run_at, status, exclusive from schedule_runs order by 1",
    )
    .fetch_all(&pool)
    .await
    .expect("after");
    assert_eq!(rows_before, rows_after);
    assert_eq!(partition_of(&pool, &old).await, "schedule_runs_default");
    assert_eq!(
        partition_of(&pool, &planned).await,
        DayPartition::new((now + Duration::days(2)).date_naive()).name()
    );
    let ledger: Vec<String> = sqlx::query_scalar("select idempotency_key from run_keys order by 1")
        .fetch_all(&pool)
        .await
        .expect("ledger");
    let mut expected = vec![key.clone(), "c".repeat(64), "caller-key".to_string()];
    expected.sort();
    assert_eq!(ledger, expected);
    let holder: Vec<(String, String)> =
        sqlx::query_as("select schedule_id, idempotency_key from runs_in_flight")
            .fetch_all(&pool)
            .await
            .expect("in flight");
    assert_eq!(holder, [("s".to_string(), flying)]);
    // The carried-over keys still refuse a second row.
    assert!(
        !runs::insert(&pool, &manual(&key, now + Duration::days(1)), now)
            .await
            .expect("again")
    );
}

/// 1,000,000 finished runs of 1,000 schedules on one old day (plus each schedule's 100 newest
/// runs, which `keep_last` keeps), retired twice: by dropping the day's partition, and by the
/// row deletes of the fallback (`delete_batch`, 1,000 rows a statement, the default
/// `history.batch_size`). Prints both times. A measurement, not a check: run it with
/// `cargo test -p kairos-store --test integration partitions:: -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "a measurement (about a minute); run by hand"]
async fn measure_dropping_a_day_against_deleting_its_rows() {
    let db = TestDb::new().await;
    let pool = db.pool();
    let old_day = at("2030-01-01T00:00:00Z");
    let rule = RetentionRule {
        older_than: at("2030-03-01T00:00:00Z"),
        keep_last: 100,
        limit: 1000,
    };
    let fill = |pool: PgPool| async move {
        sqlx::query(
            "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
               workflow_id, version, user_id, created_at, updated_at, finished_at) \
             select encode(sha256(convert_to('s' || (g % 1000) || ':' || g, 'UTF8')), 'hex'), \
               's' || (g % 1000), $1 + make_interval(secs => g / 12), \
               $1 + make_interval(secs => g / 12), 'SUCCESS', 'w', 1, 'u', $1, $1, $1 \
             from generate_series(0, 999999) g",
        )
        .bind(old_day)
        .execute(&pool)
        .await
        .expect("old runs");
        sqlx::query("analyze schedule_runs")
            .execute(&pool)
            .await
            .expect("analyze");
    };
    // The kept runs: 100 per schedule, recent, in the default partition.
    sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
           workflow_id, version, user_id) \
         select encode(sha256(convert_to('new:' || g, 'UTF8')), 'hex'), 's' || (g % 1000), \
           '2030-02-25T00:00:00Z'::timestamptz + make_interval(secs => g), \
           '2030-02-25T00:00:00Z'::timestamptz, 'SUCCESS', 'w', 1, 'u' \
         from generate_series(0, 99999) g",
    )
    .execute(&pool)
    .await
    .expect("kept runs");

    partitions::create_ahead(&pool, old_day, 0)
        .await
        .expect("the day");
    fill(pool.clone()).await;
    let started = std::time::Instant::now();
    let dropped = partitions::drop_old(&pool, &rule).await.expect("drop");
    let drop_time = started.elapsed();
    assert_eq!(dropped.runs, 1_000_000);

    // The same day again, this time in the default partition (no daily partition): row deletes.
    fill(pool.clone()).await;
    let started = std::time::Instant::now();
    let mut deleted = 0;
    loop {
        let n = retention::delete_batch(&pool, &rule).await.expect("rows");
        deleted += n;
        if n < u64::from(rule.limit) {
            break;
        }
    }
    let delete_time = started.elapsed();
    assert_eq!(deleted, 1_000_000);
    println!(
        "1,000,000 finished runs of one day: partition drop {:.2} s, row deletes {:.2} s \
         ({} statements of {})",
        drop_time.as_secs_f64(),
        delete_time.as_secs_f64(),
        deleted.div_ceil(u64::from(rule.limit)),
        rule.limit
    );
}

/// Logs reported for attempt 1 of run `key`.
async fn put_logs(pool: &PgPool, key: &str) {
    sqlx::query(
        "insert into run_logs (idempotency_key, attempt, log_url, output, updated_at) \
         values ($1, 1, 'https://logs.example.com/1', 'done', now())",
    )
    .bind(key)
    .execute(pool)
    .await
    .expect("logs");
}
