-- kairos initial schema: workflows, schedules, schedule_runs (DESIGN.md §3).
-- Timestamps are timestamptz (instants, written back as UTC). Ids are text checked by the
-- registrar (kairos_core::validate_id); the CHECKs below guard what the database can see
-- cheaply, so that a bug in a caller cannot store a row the planner would misread.

-- Workflow definitions: (workflow_id, version) -> DAG JSON, immutable once written. jsonb so
-- that "the same body again" compares semantically (key order and white space do not count).
create table workflows (
    workflow_id text not null,
    version     integer not null check (version >= 0),
    dag         jsonb not null,
    created_at  timestamptz not null default now(),
    -- The only index: lookups are always by (workflow_id, version).
    primary key (workflow_id, version)
);

create table schedules (
    schedule_id     text primary key,
    workflow_id     text not null,
    version         integer not null check (version >= 0),
    user_id         text not null,
    -- The spec as written: a cron expression, `@every <duration>` or `@at <RFC3339>`.
    cron_expr       text not null,
    timezone        text not null,
    start_at        timestamptz,
    end_at          timestamptz,
    -- The next tick to plan, UTC. NULL once the schedule is exhausted (past end_at, a fired
    -- @at, or nothing before 2200).
    next_run_at     timestamptz,
    paused          boolean not null default false,
    jitter_ms       integer not null default 0 check (jitter_ms between 0 and 3600000),
    overlap_policy  text not null default 'skip'
                    check (overlap_policy in ('allow', 'skip', 'queue')),
    catchup_policy  text not null default 'none'
                    check (catchup_policy in ('none', 'fire_immediately', 'spread')),
    -- Higher dispatches first when runs back up.
    priority        integer not null default 0,
    -- An in-flight run older than this is TIMED_OUT and stops blocking overlap; NULL = no limit.
    max_run_seconds integer check (max_run_seconds > 0),
    -- Optimistic concurrency: every registrar write is `... where revision = <read>` and
    -- increments it, so two concurrent upserts cannot interleave their read and write.
    revision        bigint not null default 1,
    created_at      timestamptz not null default now(),
    updated_at      timestamptz not null default now(),
    check (start_at is null or end_at is null or start_at <= end_at)
);

-- The planner's claim: "unpaused schedules whose next_run_at <= now()", oldest first.
-- Partial, so paused and exhausted schedules cost nothing here and the index stays the size
-- of the live set. next_run_at changes on every advance, so these updates are never HOT and
-- every index on this table is written on every advance (DESIGN.md §7): hence the short list.
create index schedules_due on schedules (next_run_at)
    where not paused and next_run_at is not null;

-- Deploy sync (`PUT /workflows/{id}/versions/{v}` with `schedules`) reads and replaces the
-- whole set of a workflow's schedules, and `GET /schedules?workflow_id=` lists it. Without
-- this index both are a scan of every schedule (10 M rows at target scale) on the compiler's
-- critical path. Its cost is one extra index entry per advance; its key never changes on an
-- advance, so PostgreSQL's bottom-up deletion (14+) keeps it from bloating. If measurement
-- shows the planner paying for it, move the mapping to a side table that advances never
-- touch. `user_id` is deliberately not indexed: that filter is an admin listing, served by
-- walking the primary key in cursor order.
create index schedules_workflow on schedules (workflow_id);

create table schedule_runs (
    -- hex(sha256(schedule_id ":" epoch_seconds(run_at))) for ticks and backfills;
    -- hex(sha256(schedule_id ":manual:" request_id)) for manual triggers (kairos_core::RunKey).
    idempotency_key text not null check (idempotency_key ~ '^[0-9a-f]{64}$'),
    -- No foreign key: history outlives a deleted schedule until retention removes it.
    schedule_id     text not null,
    -- The planned tick. Whole seconds, because the key ignores fractions: two run_at values
    -- with one key are therefore always equal (see the partitioning note below).
    run_at          timestamptz not null check (run_at = date_trunc('second', run_at)),
    -- run_at + deterministic jitter: when the dispatcher may publish it.
    fire_at         timestamptz not null,
    status          text not null default 'PENDING' check (status in (
                        'PENDING', 'QUEUED', 'ENQUEUED', 'STARTED', 'SUCCESS', 'FAILED',
                        'TIMED_OUT', 'SKIPPED', 'CANCELLED')),
    source          text not null default 'schedule'
                    check (source in ('schedule', 'manual', 'backfill', 'api')),
    -- The workflow as launched (a later deploy does not rewrite history).
    workflow_id     text not null,
    version         integer not null,
    user_id         text not null,
    -- Assigned by the executor.
    run_id          text,
    attempts        integer not null default 0 check (attempts >= 0),
    -- Why the run was skipped, cancelled or failed (human readable).
    reason          text,
    last_error      text,
    published_at    timestamptz,
    stream_seq      bigint,
    started_at      timestamptz,
    finished_at     timestamptz,
    executor_id     text,
    created_at      timestamptz not null default now(),
    updated_at      timestamptz not null default now(),
    -- Invariant 1, one row per tick: planner, backfill, crashes and duplicate workers all
    -- insert with `on conflict (idempotency_key) do nothing`.
    --
    -- Partitioning later (by run_at, for retention): a unique constraint on a partitioned
    -- table must contain the partition column, so this becomes (idempotency_key, run_at).
    -- For tick and backfill rows that is exactly as strong: the key is a function of
    -- (schedule_id, epoch_seconds(run_at)) and run_at is whole seconds (CHECK above), so one
    -- key can never appear with two run_at values. Manual triggers key on a request id, not
    -- on time; when this table is partitioned, they must record their key in a small
    -- unpartitioned ledger (primary key idempotency_key) in the same transaction.
    primary key (idempotency_key)
);

-- The dispatcher's claim: PENDING runs with fire_at <= now(), in fire_at order. Partial, so
-- the index holds only the hot set (runs not yet published) and stays small however long the
-- history grows; rows leave it as soon as they are ENQUEUED, SKIPPED or CANCELLED.
create index schedule_runs_pending on schedule_runs (fire_at)
    where status = 'PENDING';

-- A schedule's history newest first (`GET /schedules/{id}/runs`), and the registrar's
-- reconciliation of a schedule's unpublished future runs on pause, resume and reschedule.
create index schedule_runs_schedule on schedule_runs (schedule_id, run_at desc);
