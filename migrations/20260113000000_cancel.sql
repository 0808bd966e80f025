-- Operator cancel and the further overlap policies (issue 12).

-- Two more overlap policies: `buffer_one` (at most one run waits behind the one in flight)
-- and `cancel_other` (the run in flight is cancelled and the new one runs once it is gone).
-- Both are exclusive, like `skip` and `queue`.
alter table schedules drop constraint schedules_overlap_policy_check;
alter table schedules add constraint schedules_overlap_policy_check check (
    overlap_policy in ('allow', 'skip', 'queue', 'buffer_one', 'cancel_other'));
alter table schedule_runs drop constraint schedule_runs_overlap_override_check;
alter table schedule_runs add constraint schedule_runs_overlap_override_check check (
    overlap_override in ('allow', 'skip', 'queue', 'buffer_one', 'cancel_other'));

-- `queue` may be bounded: past `max_queued` waiting runs, further ticks are SKIPPED
-- (`queue_full`). NULL: unbounded. Nullable with no default: a catalog-only change, and
-- not indexed (every index on `schedules` is written on every advance).
alter table schedules add column max_queued integer check (max_queued >= 1);

-- CANCELLING: an operator asked to cancel a published run; the executor has been (or is
-- about to be) told and has not confirmed yet.
alter table schedule_runs drop constraint schedule_runs_status_check;
alter table schedule_runs add constraint schedule_runs_status_check check (status in (
    'PENDING', 'QUEUED', 'ENQUEUED', 'STARTED', 'SUCCESS', 'FAILED', 'TIMED_OUT', 'SKIPPED',
    'CANCELLED', 'RETRYING', 'CANCELLING'));

-- When the cancel was asked for (its timeout counts from here) and when the cancel message
-- was acknowledged by the stream (NULL: not sent yet, so the sweep sends it; a cancel asked
-- for while NATS is down goes out once NATS is back). Nullable, no default: catalog-only.
alter table schedule_runs
    add column cancel_requested_at timestamptz,
    add column cancel_sent_at timestamptz;

-- Invariant 5: a run being cancelled still holds its exclusive schedule until the executor
-- confirms or the cancel times out, so the one-in-flight index and the in-flight lookup
-- cover CANCELLING too.
drop index schedule_runs_one_in_flight;
create unique index schedule_runs_one_in_flight on schedule_runs (schedule_id)
    where exclusive and status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING');
drop index schedule_runs_in_flight;
create index schedule_runs_in_flight on schedule_runs (schedule_id)
    where status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING');

-- The sweep's cancel work (messages to send, cancels timed out) reads only runs being
-- cancelled: a partial index keeps that a probe of a set that is almost always empty.
create index schedule_runs_cancelling on schedule_runs (cancel_requested_at)
    where status = 'CANCELLING';
