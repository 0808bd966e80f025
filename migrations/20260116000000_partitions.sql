-- Time partitions of `schedule_runs` (DESIGN.md §7, docs/scaling.md §3): at 100,000 runs a
-- minute the table grows 144 M rows a day, and deleting history row by row costs as much
-- write work as the runs themselves. Partitioned by range of `run_at`, one partition per UTC
-- day, retention drops a whole old day instead (kairos-store `partitions.rs`).
--
-- A partitioned table cannot be made from a plain one in place: a new partitioned table is
-- created, the rows are copied, the old table is dropped and the new one takes its name.
-- Every column, default, CHECK, index and trigger is recreated exactly as the earlier
-- migrations left them; the differences are the primary key, the one-in-flight index and the
-- two side tables below, each explained where it is made.

-- The new table: the columns in the order they have today (so `r.*` reads the same), with
-- their defaults, and every CHECK under its current name (callers and tests only ever see
-- these names in errors).
create table schedule_runs_new (
    idempotency_key     text not null,
    schedule_id         text not null,
    run_at              timestamptz not null,
    fire_at             timestamptz not null,
    status              text not null default 'PENDING',
    source              text not null default 'schedule',
    workflow_id         text not null,
    version             integer not null,
    user_id             text not null,
    run_id              text,
    attempts            integer not null default 0,
    reason              text,
    last_error          text,
    published_at        timestamptz,
    stream_seq          bigint,
    started_at          timestamptz,
    finished_at         timestamptz,
    executor_id         text,
    created_at          timestamptz not null default now(),
    updated_at          timestamptz not null default now(),
    exclusive           boolean not null default false,
    released_at         timestamptz,
    attempt             integer not null default 1,
    heartbeat_at        timestamptz,
    dead_lettered_at    timestamptz,
    dlq_published_at    timestamptz,
    republished         integer not null default 0,
    overlap_override    text,
    priority            integer not null default 0,
    cancel_requested_at timestamptz,
    cancel_sent_at      timestamptz,
    parent_key          text,
    constraint schedule_runs_attempt_check check (attempt >= 1),
    constraint schedule_runs_attempts_check check (attempts >= 0),
    constraint schedule_runs_idempotency_key_check check (
        case when source = 'api'
            then idempotency_key ~ '^[A-Za-z0-9_-]{1,200}$'
                 and idempotency_key !~ '^[0-9a-f]{64}$'
            else idempotency_key ~ '^[0-9a-f]{64}$'
        end),
    constraint schedule_runs_overlap_override_check check (
        overlap_override in ('allow', 'skip', 'queue', 'buffer_one', 'cancel_other')),
    constraint schedule_runs_republished_check check (republished >= 0),
    -- Whole seconds, because the key ignores fractions: one tick key, one run_at.
    constraint schedule_runs_run_at_check check (run_at = date_trunc('second', run_at)),
    constraint schedule_runs_source_check check (
        source in ('schedule', 'manual', 'backfill', 'api', 'chain')),
    constraint schedule_runs_status_check check (status in (
        'PENDING', 'QUEUED', 'ENQUEUED', 'STARTED', 'SUCCESS', 'FAILED', 'TIMED_OUT',
        'SKIPPED', 'CANCELLED', 'RETRYING', 'CANCELLING'))
) partition by range (run_at);

-- The DEFAULT partition takes every row no daily partition covers: backfills into the past,
-- runs planned past the days created ahead, and (below) the history this migration copies.
-- Correctness never depends on a daily partition existing; retention deletes rows here row
-- by row, as before.
create table schedule_runs_default partition of schedule_runs_new default;

-- Daily partitions for today and the next 7 days (UTC), made before the copy so that the
-- runs already planned for these days land in them. Older history stays in the default
-- partition until retention deletes it. Later days are made ahead by the planner and the
-- retention role (kairos-store `partitions::create_ahead`), under the same names.
do $$
declare
    day date;
begin
    for day in select generate_series(
        (now() at time zone 'UTC')::date, (now() at time zone 'UTC')::date + 7, '1 day')::date
    loop
        execute format(
            'create table %I partition of schedule_runs_new for values from (%L) to (%L)',
            'schedule_runs_p' || to_char(day, 'YYYYMMDD'),
            (day::timestamp at time zone 'UTC'), ((day + 1)::timestamp at time zone 'UTC'));
    end loop;
end
$$;

-- The rows, as they are. No trigger exists on the new table yet, so the copy neither fires
-- chains nor writes the side tables (they are filled from the copy below).
insert into schedule_runs_new select
    idempotency_key, schedule_id, run_at, fire_at, status, source, workflow_id, version,
    user_id, run_id, attempts, reason, last_error, published_at, stream_seq, started_at,
    finished_at, executor_id, created_at, updated_at, exclusive, released_at, attempt,
    heartbeat_at, dead_lettered_at, dlq_published_at, republished, overlap_override, priority,
    cancel_requested_at, cancel_sent_at, parent_key
from schedule_runs;

-- The old table goes with its indexes and its chain trigger (the function stays and is
-- replaced below); the new one takes the name, so every statement reads it unchanged.
drop table schedule_runs;
alter table schedule_runs_new rename to schedule_runs;

-- Invariant 1, one row per tick. A unique constraint on a partitioned table must contain
-- the partition column, so the key becomes (idempotency_key, run_at). For tick and backfill
-- keys that is exactly as strong as the key alone: the key is
-- sha256(schedule_id ":" epoch_seconds(run_at)) and run_at is whole seconds (CHECK above),
-- so one key never appears with two run_at values. Manual, api and chain keys do not encode
-- run_at; the ledger `run_keys` below keeps them unique.
alter table schedule_runs add constraint schedule_runs_pkey
    primary key (idempotency_key, run_at);

-- The indexes, exactly as the earlier migrations made them (each explained there). On a
-- partitioned table each is made on every partition, present and future. The partial
-- indexes stay small: the hot set is a sliver of the newest partitions.
create index schedule_runs_schedule on schedule_runs (schedule_id, run_at desc);
create index schedule_runs_in_flight on schedule_runs (schedule_id)
    where status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING');
create index schedule_runs_queued on schedule_runs (schedule_id, fire_at)
    where status = 'QUEUED';
create index schedule_runs_due on schedule_runs (fire_at) where status in ('PENDING', 'RETRYING');
create index schedule_runs_dead_letters on schedule_runs (dead_lettered_at desc, idempotency_key)
    where dead_lettered_at is not null;
create index schedule_runs_enqueued on schedule_runs (published_at) where status = 'ENQUEUED';
create index schedule_runs_claim on schedule_runs (priority desc, fire_at, idempotency_key)
    where status in ('PENDING', 'RETRYING');
create index schedule_runs_cancelling on schedule_runs (cancel_requested_at)
    where status = 'CANCELLING';
create index schedule_runs_recent on schedule_runs (run_at desc, idempotency_key);

-- The key ledger: one row per key of a run whose run_at is not derived from its key
-- (sources `manual`: sha256(schedule_id ":manual:" request_id), run_at the request time;
-- `api`: the caller's key and its scheduled_for; `chain`: sha256(child ":" parent_key), run_at
-- the parent's outcome time, which differs when a retried parent ends again). Unpartitioned,
-- so its primary key keeps "one row per key" for them across every partition. It holds only
-- these sources, so it stays small; run_at is kept so a dropped partition's keys can go with
-- it (index below).
create table run_keys (
    idempotency_key text primary key,
    run_at          timestamptz not null
);
create index run_keys_run_at on run_keys (run_at);

insert into run_keys (idempotency_key, run_at)
select idempotency_key, run_at from schedule_runs where source in ('manual', 'api', 'chain');

-- Every insert of such a run claims its key in the ledger first, in the same statement
-- (a BEFORE trigger, so every writer is covered: the registrar's trigger-now, the run
-- launcher, the chain trigger, a manual SQL fix). A key already claimed skips the row, which
-- is what `on conflict do nothing` did when the key alone was unique: the insert writes
-- nothing and reports 0 rows. Two concurrent inserts of one key queue on the ledger's
-- primary key, exactly as they queued on the run's before. The WHEN clause runs without
-- entering plpgsql, so the planner's inserts (source `schedule`) pay nothing for it.
create function kairos_run_keys_claim() returns trigger
language plpgsql as $$
begin
    insert into run_keys (idempotency_key, run_at) values (new.idempotency_key, new.run_at)
    on conflict do nothing;
    if not found then
        return null;
    end if;
    return new;
end
$$;

create trigger schedule_runs_run_keys
    before insert on schedule_runs
    for each row
    when (new.source in ('manual', 'api', 'chain'))
    execute function kairos_run_keys_claim();

-- A deleted run frees its key (retention's row deletes, an operator's fix): the ledger never
-- holds a key without its run. Dropping a partition fires no trigger; retention deletes that
-- day's ledger rows in the transaction that drops it.
create function kairos_run_keys_release() returns trigger
language plpgsql as $$
begin
    delete from run_keys where idempotency_key = old.idempotency_key;
    return null;
end
$$;

create trigger schedule_runs_run_keys_release
    after delete on schedule_runs
    for each row
    when (old.source in ('manual', 'api', 'chain'))
    execute function kairos_run_keys_release();

-- Invariant 5, at most one run in flight per exclusive schedule. The partial unique index
-- `schedule_runs_one_in_flight` (schedule_id) cannot exist on a partitioned table (a unique
-- index must contain run_at, and two runs of one schedule have different run_at). Its
-- replacement: a side table with one row per exclusive schedule that has a run in flight,
-- kept by a trigger on schedule_runs. Its primary key carries the old index's name, so a
-- second in-flight run fails exactly as before: unique_violation (23505) on constraint
-- `schedule_runs_one_in_flight`, in the statement that moves the run.
create table runs_in_flight (
    schedule_id     text not null,
    idempotency_key text not null,
    constraint schedule_runs_one_in_flight primary key (schedule_id)
);

insert into runs_in_flight (schedule_id, idempotency_key)
select schedule_id, idempotency_key from schedule_runs
where exclusive and status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING');

-- A row that leaves the in-flight set (exclusive and ENQUEUED, STARTED, RETRYING or
-- CANCELLING) frees its schedule; a row that enters it takes the schedule, or fails.
create function kairos_one_in_flight() returns trigger
language plpgsql as $$
begin
    if tg_op <> 'INSERT' then
        if old.exclusive and old.status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING')
        then
            delete from runs_in_flight
            where schedule_id = old.schedule_id and idempotency_key = old.idempotency_key;
        end if;
    end if;
    if tg_op <> 'DELETE' then
        if new.exclusive and new.status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING')
        then
            insert into runs_in_flight (schedule_id, idempotency_key)
            values (new.schedule_id, new.idempotency_key);
        end if;
    end if;
    return null;
end
$$;

-- Three triggers whose WHEN clauses pass only rows that enter or leave the set, so the
-- dispatcher's and the intake's other updates (and every non-exclusive run) never enter
-- plpgsql for this.
create trigger schedule_runs_one_in_flight_insert
    after insert on schedule_runs
    for each row
    when (new.exclusive and new.status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING'))
    execute function kairos_one_in_flight();

create trigger schedule_runs_one_in_flight_update
    after update on schedule_runs
    for each row
    when ((old.exclusive and old.status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING'))
          <> (new.exclusive and new.status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING'))
          or (new.exclusive and new.status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING')
              and (old.schedule_id <> new.schedule_id
                   or old.idempotency_key <> new.idempotency_key)))
    execute function kairos_one_in_flight();

create trigger schedule_runs_one_in_flight_delete
    after delete on schedule_runs
    for each row
    when (old.exclusive and old.status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING'))
    execute function kairos_one_in_flight();

-- The chained trigger, as migration 20260114000000_control.sql made it, with one change: its
-- insert says `on conflict do nothing` (the conflict target `(idempotency_key)` no longer
-- names a unique index). One child run per (child, parent run) still holds: a chain key is
-- claimed in `run_keys` (trigger above), so a parent that ends again (a retry) creates
-- nothing new even though its outcome time, the child's run_at, differs.
create or replace function kairos_chain_fire() returns trigger
language plpgsql as $$
declare
    outcome text;
    at timestamptz;
    fired integer;
begin
    if new.status = 'SUCCESS' and old.status is distinct from 'SUCCESS' then
        outcome := 'success';
        at := coalesce(new.finished_at, now());
    elsif new.dead_lettered_at is not null and old.dead_lettered_at is null then
        outcome := 'failure';
        at := new.dead_lettered_at;
    elsif new.status = 'CANCELLED' and old.status is distinct from 'CANCELLED'
          and new.published_at is not null then
        outcome := 'cancelled';
        at := coalesce(new.finished_at, now());
    else
        return null;
    end if;
    insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, source,
        workflow_id, version, user_id, parent_key, priority, created_at, updated_at)
    select encode(sha256(convert_to(c.schedule_id || ':' || new.idempotency_key, 'UTF8')),
               'hex'),
           c.schedule_id, date_trunc('second', at), at, 'PENDING', 'chain',
           c.workflow_id, c.version, c.user_id, new.idempotency_key, c.priority, now(), now()
    from schedules c
    where c.chain_parent = new.schedule_id and not c.paused
      and (c.chain_on = 'always' or c.chain_on = outcome)
      -- A deleted parent fires nothing, not even its runs still in flight.
      and exists (select 1 from schedules p where p.schedule_id = new.schedule_id)
    on conflict do nothing;
    get diagnostics fired = row_count;
    if fired > 0 then
        perform pg_notify('kairos_runs', '');
    end if;
    return null;
end
$$;

-- The chain trigger, exactly as before (it went with the old table).
create trigger schedule_runs_chain
    after update on schedule_runs
    for each row
    when ((new.status = 'SUCCESS' and old.status is distinct from 'SUCCESS')
          or (new.dead_lettered_at is not null and old.dead_lettered_at is null)
          or (new.status = 'CANCELLED' and old.status is distinct from 'CANCELLED'
              and new.published_at is not null))
    execute function kairos_chain_fire();
