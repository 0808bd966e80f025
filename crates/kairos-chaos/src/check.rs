//! The properties checked after the faults, read from the database and from what the
//! executor received:
//!
//! - every expected tick (each schedule, each second of the window) is exactly one row of
//!   `schedule_runs`, published, and its launch reached the executor;
//! - the executor received every key once (it runs every message it receives);
//! - every `Nats-Msg-Id` is stored once in the launch stream (a re-publish after
//!   `start_timeout_s` carries an id of its own, `<key>:r<n>`), and the stream holds as many
//!   messages as there are distinct ids;
//! - every run of the window the executor received ended `SUCCESS`, as it reported;
//! - nothing is stuck: no `PENDING` run older than the misfire grace, no `ENQUEUED` run older
//!   than its start timeout that was never re-published, and no run of the window unfinished
//!   after the settle (the executor reports `SUCCESS` for every launch it receives).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Result;
use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::executor::Seen;

/// Statuses a run stays in.
const FINAL: &str = "('SUCCESS', 'FAILED', 'TIMED_OUT', 'SKIPPED', 'CANCELLED')";
/// The default `scheduler.misfire_grace_ms`, in seconds.
const MISFIRE_GRACE_S: i64 = 60;
/// At most this many keys are printed per kind of problem.
const SAMPLES: i64 = 5;

/// The checked window of ticks (database clock, whole seconds, both ends included).
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// The first tick checked.
    pub from: DateTime<Utc>,
    /// The last tick checked.
    pub to: DateTime<Utc>,
}

impl Window {
    /// Ticks per schedule in the window.
    pub fn seconds(&self) -> i64 {
        (self.to - self.from).num_seconds() + 1
    }
}

/// What the checks found.
#[derive(Debug, Default)]
pub struct Findings {
    /// Expected ticks (schedules × seconds).
    pub ticks: i64,
    /// Ticks without a row, runs never published, and published runs the executor never
    /// received.
    pub lost: i64,
    /// Ticks with more than one row, rows no schedule should have, message ids stored
    /// more than once, and stream messages beyond the distinct ids.
    pub doubled: i64,
    /// Runs left behind (see the module doc).
    pub stuck: i64,
    /// Runs of the window the executor received (and reported `SUCCESS` for) that did not
    /// end `SUCCESS`: a report lost.
    pub misreported: i64,
    /// Messages in the launch stream.
    pub stream_messages: u64,
    /// Runs re-published after `start_timeout_s` (the same id: the stream drops the copy
    /// unless it lost the first).
    pub republished_runs: i64,
    /// Of those, messages delivered again under an id of their own (`<key>:r<n>`) because
    /// the stream had lost the first.
    pub redelivered: usize,
    /// Keys the executor received (and so ran) in more than one launch message; counted in
    /// `doubled` too.
    pub executed_twice: i64,
    /// Runs in the window by final status other than SUCCESS, e.g. `FAILED=2`.
    pub not_success: Vec<String>,
    /// One line per problem, with keys.
    pub problems: Vec<String>,
}

/// The current database time, truncated to the second.
pub async fn db_second(pool: &PgPool) -> Result<DateTime<Utc>> {
    Ok(sqlx::query_scalar("select date_trunc('second', now())")
        .fetch_one(pool)
        .await?)
}

/// Waits until every run up to the window's end is final, at most `limit`; returns how
/// long it waited.
pub async fn settle(pool: &PgPool, window: Window, limit: Duration) -> Result<Duration> {
    let started = Instant::now();
    loop {
        let open: i64 = sqlx::query_scalar(&format!(
            "select count(*) from schedule_runs where run_at <= $1 and status not in {FINAL}"
        ))
        .bind(window.to)
        .fetch_one(pool)
        .await?;
        if open == 0 || started.elapsed() > limit {
            return Ok(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Runs every check.
pub async fn check(
    pool: &PgPool,
    window: Window,
    schedules: usize,
    start_timeout_s: i64,
    seen: &HashMap<u64, Seen>,
    stream_messages: u64,
) -> Result<Findings> {
    let mut findings = Findings {
        ticks: window.seconds() * schedules as i64,
        stream_messages,
        ..Findings::default()
    };
    let expected = "select 'chaos-' || i as schedule_id, t as run_at \
         from generate_series(0, $3 - 1) as i, generate_series($1::timestamptz, $2, '1 second') as t";
    let missing = problem_rows(
        pool,
        window,
        schedules,
        &format!(
            "select e.schedule_id || ' at ' || e.run_at from ({expected}) e \
             left join schedule_runs r using (schedule_id, run_at) where r.run_at is null"
        ),
    )
    .await?;
    findings.lost += findings.note("tick without a row", missing);
    let doubled = problem_rows(
        pool,
        window,
        schedules,
        "select schedule_id || ' at ' || run_at || ' x' || count(*) from schedule_runs \
         where run_at between $1 and $2 and $3 > 0 group by schedule_id, run_at \
         having count(*) > 1",
    )
    .await?;
    findings.doubled += findings.note("tick with more than one row", doubled);
    let extra = problem_rows(
        pool,
        window,
        schedules,
        &format!(
            "select r.idempotency_key || ' (' || r.schedule_id || ' at ' || r.run_at || ')' \
             from schedule_runs r left join ({expected}) e using (schedule_id, run_at) \
             where r.run_at between $1 and $2 and e.run_at is null"
        ),
    )
    .await?;
    findings.doubled += findings.note("row no schedule should have", extra);
    let unpublished = problem_rows(
        pool,
        window,
        schedules,
        "select idempotency_key || ' (' || status || ')' from schedule_runs \
         where run_at between $1 and $2 and $3 > 0 and published_at is null",
    )
    .await?;
    findings.lost += findings.note("run in the window never published", unpublished);
    findings.not_success = sqlx::query_scalar(
        "select status || '=' || count(*) from schedule_runs \
         where run_at between $1 and $2 and status <> 'SUCCESS' group by status order by 1",
    )
    .bind(window.from)
    .bind(window.to)
    .fetch_all(pool)
    .await?;
    stream_checks(pool, window, &mut findings, seen).await?;
    findings.republished_runs =
        sqlx::query_scalar("select count(*) from schedule_runs where republished > 0")
            .fetch_one(pool)
            .await?;
    let stuck = problem_rows(
        pool,
        window,
        schedules,
        &format!(
            "select idempotency_key || ' (' || status || ', fire_at ' || fire_at || ')' \
             from schedule_runs where $3 > 0 and $1 <= $2 and ( \
               (status = 'PENDING' and fire_at < now() - interval '{MISFIRE_GRACE_S} s') or \
               (status = 'ENQUEUED' and republished = 0 \
                and published_at < now() - interval '{start_timeout_s} s'))"
        ),
    )
    .await?;
    findings.stuck += findings.note("stuck run", stuck);
    let open = problem_rows(
        pool,
        window,
        schedules,
        &format!(
            "select idempotency_key || ' (' || status || ')' from schedule_runs \
             where run_at between $1 and $2 and $3 > 0 and status not in {FINAL}"
        ),
    )
    .await?;
    findings.stuck += findings.note("run in the window not finished after the settle", open);
    Ok(findings)
}

/// Compares the launch stream (as received) with the runs the database says were published.
async fn stream_checks(
    pool: &PgPool,
    window: Window,
    findings: &mut Findings,
    seen: &HashMap<u64, Seen>,
) -> Result<()> {
    let sequences_by_id = by(seen, |message| message.msg_id.as_str());
    findings.redelivered = sequences_by_id
        .keys()
        .filter(|id| id.contains(":r"))
        .count();
    let twice = more_than_once(&sequences_by_id);
    findings.doubled += findings.note_all("message id stored more than once", twice);
    let distinct = sequences_by_id.len() as u64;
    if findings.stream_messages > distinct {
        findings.doubled += (findings.stream_messages - distinct) as i64;
        findings.problems.push(format!(
            "launch stream holds {} messages for {distinct} distinct ids received",
            findings.stream_messages
        ));
    }
    // The executor runs every launch message it receives: a key in two messages is a tick
    // run twice, whatever the ids (a lost tail's re-publish under a new id included).
    let sequences_by_key = by(seen, |message| message.key.as_str());
    let run_twice = more_than_once(&sequences_by_key);
    findings.executed_twice = run_twice.len() as i64;
    findings.doubled += findings.note_all("tick run twice by the executor", run_twice);
    // Up to the window's end only: a run after it may have been committed and not yet
    // published when the fleet was killed for this check, and its publish is then the
    // sweeper's (an unacknowledged wave), which that kill stopped too.
    let published: Vec<String> = sqlx::query_scalar(
        "select idempotency_key from schedule_runs \
         where published_at is not null and run_at <= $1",
    )
    .bind(window.to)
    .fetch_all(pool)
    .await?;
    let never: Vec<String> = published
        .into_iter()
        .filter(|key| !sequences_by_key.contains_key(key.as_str()))
        .collect();
    findings.lost += findings.note_all("published run the executor never received", never);
    // The executor reports SUCCESS for every launch it receives: a received run that ended
    // otherwise lost the executor's report.
    let ended: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "select idempotency_key, status, reason from schedule_runs \
         where run_at between $1 and $2 and status <> 'SUCCESS'",
    )
    .bind(window.from)
    .bind(window.to)
    .fetch_all(pool)
    .await?;
    let misreported: Vec<String> = ended
        .into_iter()
        .filter(|(key, _, _)| sequences_by_key.contains_key(key.as_str()))
        .map(|(key, status, reason)| format!("{key} {status} ({})", reason.unwrap_or_default()))
        .collect();
    findings.misreported += findings.note_all(
        "run the executor reported SUCCESS for, not SUCCESS in the database",
        misreported,
    );
    Ok(())
}

/// The stream sequences of the messages `seen`, grouped by `field`.
fn by<'a>(
    seen: &'a HashMap<u64, Seen>,
    field: impl Fn(&'a Seen) -> &'a str,
) -> HashMap<&'a str, Vec<u64>> {
    let mut grouped: HashMap<&str, Vec<u64>> = HashMap::new();
    for (seq, message) in seen {
        grouped.entry(field(message)).or_default().push(*seq);
    }
    grouped
}

/// The groups of more than one message, one line each.
fn more_than_once(grouped: &HashMap<&str, Vec<u64>>) -> Vec<String> {
    grouped
        .iter()
        .filter(|(_, seqs)| seqs.len() > 1)
        .map(|(name, seqs)| format!("{name} at stream sequences {seqs:?}"))
        .collect()
}

/// A count and up to [`SAMPLES`] lines of a query over the window (`$1`, `$2`) and the
/// number of schedules (`$3`).
async fn problem_rows(
    pool: &PgPool,
    window: Window,
    schedules: usize,
    query: &str,
) -> Result<(i64, Vec<String>)> {
    let count: i64 = sqlx::query_scalar(&format!("select count(*) from ({query}) q"))
        .bind(window.from)
        .bind(window.to)
        .bind(schedules as i64)
        .fetch_one(pool)
        .await?;
    let samples: Vec<String> = sqlx::query_scalar(&format!("{query} limit {SAMPLES}"))
        .bind(window.from)
        .bind(window.to)
        .bind(schedules as i64)
        .fetch_all(pool)
        .await?;
    Ok((count, samples))
}

impl Findings {
    fn note(&mut self, what: &str, (count, samples): (i64, Vec<String>)) -> i64 {
        if count > 0 {
            self.problems
                .push(format!("{count} × {what}, e.g. {}", samples.join("; ")));
        }
        count
    }

    fn note_all(&mut self, what: &str, all: Vec<String>) -> i64 {
        let count = all.len() as i64;
        let samples = all.into_iter().take(SAMPLES as usize).collect();
        self.note(what, (count, samples))
    }
}
