-- Issue 27, items 3 and 4: skipping one occurrence of a schedule, and pausing until a time.

-- One row per tick an operator asked to skip. The planner writes the run of such a tick as
-- SKIPPED instead of PENDING (a lookup by primary key inside its insert), and a write that
-- finds the tick already planned marks the run SKIPPED in the same transaction, so the row
-- is the one place that says "do not launch this tick" whether or not it was planned yet.
-- Rows of past ticks are kept as the record of why a tick did not run, until retention
-- removes them with the runs of their age. No foreign key: a skip of a deleted schedule is
-- history like its runs, and a re-created schedule of the same id keeps it. `run_at` is a
-- tick, so whole seconds as in `schedule_runs`.
create table schedule_skips (
    schedule_id text not null,
    run_at      timestamptz not null check (run_at = date_trunc('second', run_at)),
    note        text check (char_length(note) <= 1000),
    skipped_by  text not null,
    created_at  timestamptz not null default now(),
    primary key (schedule_id, run_at)
);

-- Retention finds old skips by their tick, oldest first, without reading every schedule's.
create index schedule_skips_run_at on schedule_skips (run_at);

-- When a paused schedule resumes by itself (NULL: paused until resumed by hand) and who
-- paused it. Nullable with no default: catalog-only changes. A planner resumes the schedules
-- whose `paused_until` has come, on the database clock, with the resume a caller would do;
-- a manual resume or a pause without `until` clears it.
alter table schedules
    add column paused_until timestamptz,
    add column paused_by    text;

-- The planners' look-up of pauses that have ended: partial, so only schedules paused until
-- a time are in it and the planner's advances (which never touch these columns) pay nothing.
create index schedules_paused_until on schedules (paused_until)
    where paused and paused_until is not null;
