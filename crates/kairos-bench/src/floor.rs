//! The floor of one loop mark's work on this machine: the core-seconds PostgreSQL and
//! nats-server spend on that work done at their raw limits, with nothing of kairos in
//! between, beside the core-seconds the loop's targets leave from the tick.
//!
//! One mark's work, at the least, whatever kairos's design:
//! - PostgreSQL: three status changes of each of `--schedules` runs (`ENQUEUED`,
//!   `STARTED`, `SUCCESS`) on a copy of `schedule_runs` with every index and constraint
//!   (no trigger), keys hashed as kairos derives them, batches of [`BATCH`] keys, one
//!   transaction each, `--instances` sessions side by side. No attempt is written and no run
//!   is read or locked first.
//! - nats-server: `--schedules` launch-sized messages with a `Nats-Msg-Id`, and twice as
//!   many report-sized ones, each published with an acknowledgement, delivered once to a
//!   pull consumer and acknowledged.
//!
//! The targets (every burst published ≤ 3 s after its tick, and applied − sent p99 ≤ 2 s
//! with an executor that reports as soon as it receives a launch) put nearly all of that
//! work within about [`WINDOW_S`] of the tick: the machine's cores × [`WINDOW_S`].

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy};
use futures::StreamExt;

use crate::executor;
use crate::limits;
use crate::machine::CpuSample;
use crate::setup::Scratch;
use crate::Args;

/// Keys per status statement: kairos's largest batch (`scheduler.batch_size`, and the
/// intake's `MAX_BATCH`), the cheapest per row.
const BATCH: usize = 5_000;
/// Seconds from the tick within which the targets put a mark's work: the burst's 3 s, then
/// the 2 s of applied − sent.
pub const WINDOW_S: f64 = 5.0;
/// The longest the floor's consumer waits for a message already in its stream.
const CONSUME_WAIT: Duration = Duration::from_secs(30);

/// What one server spent on its share.
#[derive(Debug, Clone, Copy)]
pub struct Spent {
    /// CPU seconds of the server's processes.
    pub core_s: f64,
    /// Wall-clock seconds.
    pub wall_s: f64,
}

/// The floor of one mark of `runs` runs.
#[derive(Debug, Clone, Copy)]
pub struct Floor {
    /// Runs per mark.
    pub runs: usize,
    /// Sessions the status changes were written with.
    pub sessions: usize,
    /// PostgreSQL's share.
    pub postgres: Spent,
    /// nats-server's share.
    pub nats: Spent,
}

impl Floor {
    /// Both servers together.
    pub fn core_s(&self) -> f64 {
        self.postgres.core_s + self.nats.core_s
    }

    /// The core-seconds the targets leave from the tick on a machine of `cores` cores.
    pub fn budget_s(cores: usize) -> f64 {
        WINDOW_S * cores as f64
    }
}

/// Measures both shares for `--schedules` runs.
pub async fn measure(args: &Args, scratch: &Scratch) -> Result<Floor> {
    let sessions = args.instances.max(1);
    let postgres = postgres(args.schedules, sessions, scratch).await?;
    let nats = nats(args.schedules, scratch).await?;
    Ok(Floor {
        runs: args.schedules,
        sessions,
        postgres,
        nats,
    })
}

/// Fails when a share was not measured (no CPU seen: the servers' processes are not on
/// this machine, or not named `postgres` and `nats-server`), since the floor would then
/// say nothing.
pub fn check(floor: &Floor) -> Result<()> {
    if floor.postgres.core_s <= 0.0 || floor.nats.core_s <= 0.0 {
        bail!(
            "the floor saw no CPU of PostgreSQL ({:.2} s) or nats-server ({:.2} s): both \
             must run on this machine",
            floor.postgres.core_s,
            floor.nats.core_s
        );
    }
    Ok(())
}

/// Prints the floor beside the budget.
pub fn print(floor: &Floor) {
    let cores = crate::machine::cores();
    let budget = Floor::budget_s(cores);
    println!(
        "floor of one mark's work at this machine's raw limits (nothing of kairos in between):"
    );
    println!(
        "  postgres: {} status changes (3 x {} runs; batches of {BATCH}, {} sessions): \
         {:.1} core-s ({:.1} s wall)",
        3 * floor.runs,
        floor.runs,
        floor.sessions,
        floor.postgres.core_s,
        floor.postgres.wall_s
    );
    println!(
        "  nats-server: {} launches + {} reports, each stored, delivered and acknowledged \
         once: {:.1} core-s ({:.1} s wall)",
        floor.runs,
        2 * floor.runs,
        floor.nats.core_s,
        floor.nats.wall_s
    );
    println!(
        "  together {:.1} core-s; the targets leave about {WINDOW_S:.0} s x {cores} cores = \
         {budget:.0} core-s from the tick (burst <= 3 s, then applied - sent p99 <= 2 s): \
         the floor is {:.0}% of it",
        floor.core_s(),
        100.0 * floor.core_s() / budget.max(1e-9)
    );
}

/// The three status changes of `n` runs on a copy of `schedule_runs`.
async fn postgres(n: usize, sessions: usize, scratch: &Scratch) -> Result<Spent> {
    let pool = &scratch.pool;
    // Keys as kairos derives them (hex of a hash), so each change lands where a real one
    // would in the key indexes, not at their right edge.
    let keys =
        limits::runs_copy(pool, "floor_runs", n, "encode(sha256(int8send(i)), 'hex')").await?;
    let batches: Vec<Vec<String>> = keys.chunks(BATCH).map(<[String]>::to_vec).collect();
    let changes = [
        (
            "ENQUEUED",
            "stream_seq = v.seq, published_at = clock_timestamp()",
        ),
        (
            "STARTED",
            "started_at = clock_timestamp(), executor_id = 'bench-executor'",
        ),
        ("SUCCESS", "finished_at = clock_timestamp()"),
    ];
    let before = CpuSample::take(&[]);
    let started = Instant::now();
    for (status, set) in changes {
        let sql = format!(
            "update floor_runs r set status = '{status}', {set}, updated_at = now() \
             from unnest($1::text[], $2::int8[]) as v(key, seq) \
             where r.idempotency_key = v.key"
        );
        limits::update_in_sessions(pool, &sql, &batches, sessions).await?;
    }
    let spent = Spent {
        core_s: CpuSample::take(&[]).since(&before).seconds("postgres"),
        wall_s: started.elapsed().as_secs_f64(),
    };
    sqlx::query("drop table floor_runs").execute(pool).await?;
    Ok(spent)
}

/// `n` launches and `2 n` reports through a stream of their own, deleted afterwards.
async fn nats(n: usize, scratch: &Scratch) -> Result<Spent> {
    let js = jetstream::new(scratch.nats().await?);
    let name = "KAIROS_BENCH_FLOOR";
    let stream = limits::fresh_stream(&js, name, "kairosbenchfloor").await?;
    let consumer = stream
        .create_consumer(pull::Config {
            ack_policy: AckPolicy::Explicit,
            max_ack_pending: 20_000,
            inactive_threshold: Duration::from_secs(600),
            ..Default::default()
        })
        .await?;
    let launch = bytes::Bytes::from(limits::launch_sized_body());
    let report = bytes::Bytes::from(executor::report_body(&"0".repeat(64), "SUCCESS", 1));
    let before = CpuSample::take(&[]);
    let started = Instant::now();
    limits::publish_all(&js, "kairosbenchfloor.launch", n, &launch, true).await?;
    consume(&consumer, n).await?;
    limits::publish_all(&js, "kairosbenchfloor.status", 2 * n, &report, false).await?;
    consume(&consumer, 2 * n).await?;
    let spent = Spent {
        core_s: CpuSample::take(&[]).since(&before).seconds("nats-server"),
        wall_s: started.elapsed().as_secs_f64(),
    };
    let _ = js.delete_stream(name).await;
    Ok(spent)
}

/// Receives and acknowledges `n` messages (published before: they are all in the stream),
/// failing after [`CONSUME_WAIT`] without one.
async fn consume(consumer: &jetstream::consumer::PullConsumer, n: usize) -> Result<()> {
    let mut got = 0;
    let mut last = Instant::now();
    while got < n {
        let mut messages = consumer
            .stream()
            .max_messages_per_batch(1_000)
            .expires(Duration::from_secs(5))
            .messages()
            .await?
            .take(n - got);
        while let Some(message) = messages.next().await {
            let message = message.map_err(|err| anyhow::anyhow!("floor consumer: {err}"))?;
            message
                .ack()
                .await
                .map_err(|err| anyhow::anyhow!("floor ack: {err}"))?;
            got += 1;
            last = Instant::now();
        }
        if last.elapsed() > CONSUME_WAIT {
            bail!("the floor's consumer received {got} of {n} messages, then none for {CONSUME_WAIT:?}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floor(postgres_s: f64, nats_s: f64) -> Floor {
        let spent = |core_s| Spent {
            core_s,
            wall_s: 1.0,
        };
        Floor {
            runs: 100,
            sessions: 1,
            postgres: spent(postgres_s),
            nats: spent(nats_s),
        }
    }

    #[test]
    fn a_share_with_no_cpu_seen_fails_the_check() {
        assert!(check(&floor(1.5, 0.5)).is_ok());
        assert!(check(&floor(0.0, 0.5)).is_err());
        assert!(check(&floor(1.5, 0.0)).is_err());
    }

    #[test]
    fn the_budget_is_the_window_on_every_core() {
        assert_eq!(Floor::budget_s(2), 10.0);
        assert_eq!(floor(12.5, 7.5).core_s(), 20.0);
    }
}
