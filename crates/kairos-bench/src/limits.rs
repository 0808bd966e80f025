//! The machine's own limits for the same work, without kairos in between: pipelined
//! JetStream publishing of launch-sized messages with a `Nats-Msg-Id` (no PostgreSQL), and
//! batched status updates on a copy of `schedule_runs` with every index (no NATS).

use std::time::Instant;

use anyhow::Result;
use async_nats::jetstream::{self, message::PublishMessage, stream};
use futures::future::join_all;

use sqlx::PgPool;

use crate::setup::Scratch;
use crate::Args;

/// Messages or rows a second.
#[derive(Debug, Clone)]
pub struct Limits {
    /// JetStream: messages acknowledged per second.
    pub nats_per_s: f64,
    /// PostgreSQL: `PENDING` → `ENQUEUED` updates committed per second.
    pub pg_per_s: f64,
}

/// kairos's batch size, used for both (the same chunking kairos publishes and records in).
const BATCH: usize = 2000;

/// Measures both limits for `--schedules` messages/rows.
pub async fn measure(args: &Args, scratch: &Scratch) -> Result<Limits> {
    let nats_per_s = nats(args.schedules, scratch).await?;
    let pg_per_s = postgres(args.schedules, args.instances, scratch).await?;
    Ok(Limits {
        nats_per_s,
        pg_per_s,
    })
}

/// Publishes `n` messages of a launch message's size in pipelined chunks (stage a chunk,
/// then await every acknowledgement), on a stream of its own that is deleted afterwards.
async fn nats(n: usize, scratch: &Scratch) -> Result<f64> {
    let client = scratch.nats().await?;
    let js = jetstream::new(client);
    let name = "KAIROS_BENCH_RAW";
    fresh_stream(&js, name, "kairosbenchraw").await?;
    let body = bytes::Bytes::from(launch_sized_body());
    let started = Instant::now();
    publish_all(&js, "kairosbenchraw.launch.bench", n, &body, true).await?;
    let rate = n as f64 / started.elapsed().as_secs_f64();
    let _ = js.delete_stream(name).await;
    Ok(rate)
}

/// Stream `name` on `<prefix>.>`, created empty (a leftover one is deleted first), on file
/// storage with kairos's duplicate window for message ids.
pub(crate) async fn fresh_stream(
    js: &jetstream::Context,
    name: &str,
    prefix: &str,
) -> Result<stream::Stream> {
    let _ = js.delete_stream(name).await;
    Ok(js
        .create_stream(stream::Config {
            name: name.into(),
            subjects: vec![format!("{prefix}.>")],
            duplicate_window: std::time::Duration::from_secs(900),
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await?)
}

/// Publishes `n` copies of `body` on `subject` in pipelined chunks of [`BATCH`] (stage a
/// chunk, then await every acknowledgement), each with its own `Nats-Msg-Id` when `ids`
/// (as kairos publishes launches).
pub(crate) async fn publish_all(
    js: &jetstream::Context,
    subject: &str,
    n: usize,
    body: &bytes::Bytes,
    ids: bool,
) -> Result<()> {
    for chunk in (0..n).collect::<Vec<_>>().chunks(BATCH) {
        let mut acks = Vec::with_capacity(chunk.len());
        for i in chunk {
            let mut publish = PublishMessage::build().payload(body.clone());
            if ids {
                publish = publish.message_id(format!("{i:064x}"));
            }
            acks.push(js.send_publish(subject.to_string(), publish).await?);
        }
        for ack in join_all(acks.into_iter().map(std::future::IntoFuture::into_future)).await {
            ack?;
        }
    }
    Ok(())
}

/// A body as large as kairos's launch message for the bench workflow.
pub(crate) fn launch_sized_body() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "idempotency_key": "0".repeat(64),
        "schedule_id": "bench-99999",
        "workflow_id": "bench",
        "version": 1,
        "user_id": "bench",
        "scheduled_for": "2026-11-22T20:00:00Z",
        "fire_at": "2026-11-22T20:00:00Z",
        "source": "schedule",
        "attempt": 1,
        "dag": {"nodes": [{"id": "noop"}]},
    }))
    .expect("json")
}

/// Writes `n` `PENDING` rows into a copy of `schedule_runs` (same columns, constraints and
/// indexes), then moves them to `ENQUEUED` with `connections` sessions in parallel, one
/// transaction per batch of 2,000 keys, with the statement shape kairos records with.
async fn postgres(n: usize, connections: usize, scratch: &Scratch) -> Result<f64> {
    let pool = &scratch.pool;
    let keys = runs_copy(pool, "raw_runs", n, "lpad(to_hex(i), 64, '0')").await?;
    let batches: Vec<Vec<String>> = keys.chunks(BATCH).map(<[String]>::to_vec).collect();
    let started = Instant::now();
    update_in_sessions(
        pool,
        "update raw_runs r set status = 'ENQUEUED', stream_seq = v.seq, \
           published_at = clock_timestamp(), attempts = r.attempts + 1, updated_at = now() \
         from unnest($1::text[], $2::int8[]) as v(key, seq) \
         where r.idempotency_key = v.key and r.status = 'PENDING'",
        &batches,
        connections,
    )
    .await?;
    let rate = n as f64 / started.elapsed().as_secs_f64();
    sqlx::query("drop table raw_runs").execute(pool).await?;
    Ok(rate)
}

/// Creates `table`, a copy of `schedule_runs` (columns, constraints and indexes; no
/// trigger), with `n` `PENDING` runs keyed by `key` (an expression of `i`, 1 to `n`), and
/// analyses it; returns the keys in the order they were written.
pub(crate) async fn runs_copy(
    pool: &PgPool,
    table: &str,
    n: usize,
    key: &str,
) -> Result<Vec<String>> {
    sqlx::query(&format!("drop table if exists {table}"))
        .execute(pool)
        .await?;
    sqlx::query(&format!(
        "create table {table} (like schedule_runs including all)"
    ))
    .execute(pool)
    .await?;
    let keys = sqlx::query_scalar(&format!(
        "insert into {table} (idempotency_key, schedule_id, run_at, fire_at, workflow_id, \
           version, user_id) \
         select {key}, 'bench-' || i, date_trunc('minute', now()), \
           date_trunc('minute', now()), 'bench', 1, 'bench' \
         from generate_series(1, $1::int8) as i \
         returning idempotency_key"
    ))
    .bind(n as i64)
    .fetch_all(pool)
    .await?;
    sqlx::query(&format!("analyze {table}"))
        .execute(pool)
        .await?;
    Ok(keys)
}

/// Runs `sql` once per batch, with the batch's keys as `$1` and their positions in it as
/// `$2`, one transaction each, on `sessions` sessions side by side (session `k` takes
/// batches `k`, `k + sessions`, ...).
pub(crate) async fn update_in_sessions(
    pool: &PgPool,
    sql: &str,
    batches: &[Vec<String>],
    sessions: usize,
) -> Result<()> {
    let sessions = sessions.max(1);
    let lanes = (0..sessions).map(|lane| async move {
        for batch in batches.iter().skip(lane).step_by(sessions) {
            let mut tx = pool.begin().await?;
            sqlx::query(sql)
                .bind(batch)
                .bind((0..batch.len() as i64).collect::<Vec<_>>())
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        }
        anyhow::Ok(())
    });
    for lane in join_all(lanes).await {
        lane?;
    }
    Ok(())
}
