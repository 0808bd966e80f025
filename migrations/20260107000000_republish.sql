-- Lost launches (a broker that lost a message after acknowledging it must not wedge a
-- schedule): an ENQUEUED run that no executor STARTED within its schedule's start timeout is
-- re-published, at most `scheduler.max_republish` times, then failed as never started.

-- Per schedule: NULL takes `scheduler.start_timeout_s`; 0 turns the check off.
alter table schedules add column start_timeout_s integer check (start_timeout_s >= 0);

-- How often the attempt in progress was re-published.
alter table schedule_runs add column republished integer not null default 0
    check (republished >= 0);

-- The sweep's look-up of unstarted runs, oldest publish first. Partial: only ENQUEUED runs,
-- a set as small as the runs executors have not picked up yet. It costs one index entry
-- per launch; without it every sweep would scan every in-flight run.
create index schedule_runs_enqueued on schedule_runs (published_at) where status = 'ENQUEUED';
