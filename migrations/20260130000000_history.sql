-- The history of changes (docs/operations.md "History of changes"): one row per write to a
-- schedule, calendar or workflow, written in the transaction of the write, so a write that
-- rolls back leaves no row and a committed one always has its row. The subject columns are
-- all nullable because one row names what the write touched: a schedule (with its
-- workflow), a calendar, a workflow version, or a run of a schedule. `changes` is a JSON
-- array of {field, old, new}; `at` is the database clock of the write's transaction.
create table change_history (
    id          bigint generated always as identity primary key,
    at          timestamptz not null,
    actor       text not null,
    request_id  text,
    kind        text not null,
    schedule_id text,
    calendar    text,
    workflow_id text,
    version     integer,
    run_key     text,
    note        text,
    changes     jsonb not null default '[]'
);

-- A schedule's history page (GET /schedules/{id}/history) reads newest first by id.
create index change_history_schedule on change_history (schedule_id, id desc)
    where schedule_id is not null;

-- Retention deletes by age, and the filters since/until read by time.
create index change_history_at on change_history (at);

-- The schedule revision that produced a run, set once when the run is written and never
-- changed: `revision` (20260126000000_run_revision.sql) is stamped again whenever a schedule
-- write keeps or revives a run, so it says what the run was last checked against, not what
-- produced it. NULL for runs written before this column and for runs of no schedule.
alter table schedule_runs add column schedule_revision bigint;

-- Set at insert from the revision the run is written with. Triggers of one event fire in
-- name order, so this runs after `schedule_runs_revision` has filled a missing revision.
create function kairos_run_schedule_revision() returns trigger language plpgsql as $$
begin
    new.schedule_revision := new.revision;
    return new;
end $$;

create trigger schedule_runs_stamp_schedule_revision before insert on schedule_runs
    for each row execute function kairos_run_schedule_revision();

-- Never changed afterwards, whatever an update sets.
create function kairos_run_schedule_revision_kept() returns trigger language plpgsql as $$
begin
    new.schedule_revision := old.schedule_revision;
    return new;
end $$;

create trigger schedule_runs_keep_schedule_revision before update of schedule_revision
    on schedule_runs for each row execute function kairos_run_schedule_revision_kept();
