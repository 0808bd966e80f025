-- The dispatcher and status intake (issue 4): overlap enforcement, the in-flight and queued
-- lookups, and the key rule for runs started through `POST /run-launcher/start`.

-- Invariant 5, at most one run in flight for a schedule whose overlap policy is `skip` or
-- `queue`. The dispatcher marks a run `exclusive` when it publishes it under such a policy
-- (the policy is read at fire time, so a later policy change does not rewrite history), and
-- the database refuses a second exclusive in-flight run of the same schedule. The dispatcher
-- also serializes itself per exclusive schedule (a transaction-scoped advisory lock) so it
-- never publishes a run it could not then record; this index is the backstop, not the plan.
-- Adding a column with a constant default is a catalog-only change (PostgreSQL 11+).
alter table schedule_runs add column exclusive boolean not null default false;

create unique index schedule_runs_one_in_flight on schedule_runs (schedule_id)
    where exclusive and status in ('ENQUEUED', 'STARTED');

-- In-flight runs by schedule: the overlap check at claim time (any in-flight run of the
-- schedule blocks, exclusive or not, so switching a schedule from `allow` to `skip` takes
-- effect at once) and the max_run_seconds sweep. Partial, so it holds only runs an executor
-- still owes an answer for, not the history.
create index schedule_runs_in_flight on schedule_runs (schedule_id)
    where status in ('ENQUEUED', 'STARTED');

-- Runs waiting behind an in-flight run (overlap `queue`), oldest first per schedule: the
-- release on a terminal status takes exactly one, in fire_at order.
create index schedule_runs_queued on schedule_runs (schedule_id, fire_at)
    where status = 'QUEUED';

-- Keys. Runs kairos plans (ticks, backfills, manual triggers) keep their 64 lowercase hex
-- digits (a sha256, kairos_core::RunKey). A run started through `POST /run-launcher/start`
-- carries the caller's key, which the status and launch schemas allow to be any id
-- (`^[A-Za-z0-9_-]{1,200}$`, always a valid NATS subject token). Such a key may not be
-- 64 lowercase hex digits: that shape is reserved for derived keys, so a caller can never
-- name (and so "find") a tick's run through the run launcher.
alter table schedule_runs drop constraint schedule_runs_idempotency_key_check;
alter table schedule_runs add constraint schedule_runs_idempotency_key_check check (
    case when source = 'api'
        then idempotency_key ~ '^[A-Za-z0-9_-]{1,200}$'
             and idempotency_key !~ '^[0-9a-f]{64}$'
        else idempotency_key ~ '^[0-9a-f]{64}$'
    end
);
