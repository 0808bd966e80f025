-- Failure handling (DESIGN.md §3 "attempts"): a schedule's retry policy and heartbeat
-- timeout, a run's attempt number, its last sign of life and its dead letter, and the
-- history of its attempts.

-- The retry policy: `max_attempts` (1 = no retry) and at most one way to wait, either a list
-- of intervals (the last repeats) or an exponential backoff. The CHECKs repeat the
-- registrar's rules so that no writer can store a policy the workers would misread. All are
-- added with constant defaults or as NULL: catalog-only changes.
alter table schedules
    add column max_attempts integer not null default 1 check (max_attempts between 1 and 100),
    add column retry_intervals_s integer[]
        check (cardinality(retry_intervals_s) between 1 and 100
               and 0 < all(retry_intervals_s)),
    add column retry_backoff_initial_s integer check (retry_backoff_initial_s > 0),
    add column retry_backoff_multiplier double precision check (retry_backoff_multiplier >= 1),
    add column retry_backoff_max_s integer,
    -- A STARTED run with no report (heartbeat or status) for this long is TIMED_OUT.
    add column heartbeat_timeout_s integer check (heartbeat_timeout_s > 0),
    add constraint schedules_retry_one_wait
        check (retry_intervals_s is null or retry_backoff_initial_s is null),
    add constraint schedules_retry_backoff_whole check (
        (retry_backoff_initial_s is null and retry_backoff_multiplier is null
         and retry_backoff_max_s is null)
        or (retry_backoff_initial_s is not null and retry_backoff_multiplier is not null
            and retry_backoff_max_s >= retry_backoff_initial_s));

-- A run's attempts. `attempt` is the attempt in progress (1 for a run that never failed);
-- `heartbeat_at` the executor's last heartbeat; `dead_lettered_at` when its last attempt
-- failed for good, and `dlq_published_at` when its copy reached the dead-letter stream
-- (NULL in between: the dispatcher's sweep publishes it, by message id `key:dlq:attempt`).
alter table schedule_runs
    add column attempt integer not null default 1 check (attempt >= 1),
    add column heartbeat_at timestamptz,
    add column dead_lettered_at timestamptz,
    add column dlq_published_at timestamptz;

-- RETRYING: an attempt failed and the next one waits for its time, in `fire_at`. It is
-- claimed like a PENDING run once due, and it still holds its schedule (one in flight).
alter table schedule_runs drop constraint schedule_runs_status_check;
alter table schedule_runs add constraint schedule_runs_status_check check (status in (
    'PENDING', 'QUEUED', 'ENQUEUED', 'STARTED', 'SUCCESS', 'FAILED', 'TIMED_OUT', 'SKIPPED',
    'CANCELLED', 'RETRYING'));

-- The dispatcher's claim: PENDING runs and retries whose time has come, in fire_at order.
-- It replaces schedule_runs_pending: one partial index for both, still only the hot set.
create index schedule_runs_due on schedule_runs (fire_at) where status in ('PENDING', 'RETRYING');
drop index schedule_runs_pending;

-- Invariant 5 with retries: a run waiting for its next attempt still holds its exclusive
-- schedule, so the one-in-flight index and the in-flight lookup cover RETRYING too.
drop index schedule_runs_one_in_flight;
create unique index schedule_runs_one_in_flight on schedule_runs (schedule_id)
    where exclusive and status in ('ENQUEUED', 'STARTED', 'RETRYING');
drop index schedule_runs_in_flight;
create index schedule_runs_in_flight on schedule_runs (schedule_id)
    where status in ('ENQUEUED', 'STARTED', 'RETRYING');

-- Dead letters newest first (`GET /dead-letters`), and the DLQ outbox of the sweep. Partial:
-- only dead-lettered runs are in it.
create index schedule_runs_dead_letters on schedule_runs (dead_lettered_at desc, idempotency_key)
    where dead_lettered_at is not null;

-- One row per finished attempt (the run row holds the attempt in progress): what each
-- attempt ended as, why, on which executor, and when. Deleted with its run by retention.
create table run_attempts (
    idempotency_key text not null,
    attempt         integer not null check (attempt >= 1),
    status          text not null check (status in ('SUCCESS', 'FAILED', 'TIMED_OUT')),
    error           text,
    executor_id     text,
    run_id          text,
    published_at    timestamptz,
    started_at      timestamptz,
    finished_at     timestamptz not null,
    primary key (idempotency_key, attempt)
);

-- `POST /runs/{key}/retry` is idempotent per request id: the attempt a request started.
create table run_retry_requests (
    idempotency_key text not null,
    request_id      text not null,
    attempt         integer not null,
    created_at      timestamptz not null default now(),
    primary key (idempotency_key, request_id)
);
