//! What the store's tests write straight into the tables: schedules and runs with only
//! the columns a test reads.

#![allow(dead_code)] // Each test binary uses a part of these.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

/// Schedules `s1` … `s<n>`, every minute, overlap `skip`.
pub async fn schedules(pool: &PgPool, n: i64) {
    sqlx::query(
        "insert into schedules (schedule_id, workflow_id, version, user_id, cron_expr, \
           timezone, overlap_policy) \
         select 's' || i, 'w', 1, 'u', '* * * * *', 'UTC', 'skip' \
         from generate_series(1, $1::int8) as i",
    )
    .bind(n)
    .execute(pool)
    .await
    .expect("schedules");
}

/// A run of `schedule` due at `fire_at`, in `status`.
pub async fn stored_run(pool: &PgPool, schedule: &str, fire_at: DateTime<Utc>, status: &str) {
    sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
           workflow_id, version, user_id) \
         values (encode(sha256(convert_to($1 || $2::text, 'UTF8')), 'hex'), $1, $2, $2, \
           $3, 'w', 1, 'u')",
    )
    .bind(schedule)
    .bind(fire_at)
    .bind(status)
    .execute(pool)
    .await
    .expect("run");
}

/// The key of the one run of `schedule`.
pub async fn key_of(pool: &PgPool, schedule: &str) -> String {
    sqlx::query_scalar("select idempotency_key from schedule_runs where schedule_id = $1")
        .bind(schedule)
        .fetch_one(pool)
        .await
        .expect("key")
}

/// `n` runs of schedules `s1`..`s<n>` at `run_at`, in `status`.
pub async fn runs(pool: &PgPool, n: i64, run_at: DateTime<Utc>, status: &str) {
    sqlx::query(
        "insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, \
           workflow_id, version, user_id) \
         select encode(sha256(convert_to('s' || i || $2::text, 'UTF8')), 'hex'), 's' || i, \
           $2, $2, $3, 'w', 1, 'u' \
         from generate_series(1, $1::int8) as i",
    )
    .bind(n)
    .bind(run_at)
    .bind(status)
    .execute(pool)
    .await
    .expect("runs");
}

/// Now, in whole seconds (a run's `run_at` has no fraction).
pub fn now() -> DateTime<Utc> {
    use chrono::{DurationRound, TimeDelta};
    Utc::now()
        .duration_trunc(TimeDelta::seconds(1))
        .expect("whole second")
}
