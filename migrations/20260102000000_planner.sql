-- The planner's bookkeeping on `schedules` and its wake-up signal (issue 4).

-- Missed ticks are counted, not stored as rows (DESIGN.md §4, catch-up `none` and ticks older
-- than `max_catchup`): the planner adds each pass's count here in the same statement that
-- advances next_run_at. That update already rewrites the row (never HOT, see the first
-- migration), so the counter costs no extra index write. `planner_error` says why the
-- planner parked a schedule (next_run_at set to NULL because its stored spec or zone no
-- longer parses); a successful plan clears it. Both are added with constant defaults, which
-- PostgreSQL 11+ does without rewriting the table.
alter table schedules
    add column missed_ticks  bigint not null default 0 check (missed_ticks >= 0),
    add column planner_error text;

-- Wake-up of idle planners: a new schedule, or a registrar write (every registrar write
-- increments `revision`) that leaves the schedule plannable, sends NOTIFY on
-- `kairos_schedules`. The planner's own advances never change `revision`, so they do not wake
-- planners. A trigger rather than a call in each store statement, so that every writer
-- (upsert, deploy sync, resume, a manual SQL fix) is covered. The payload is empty so that
-- PostgreSQL folds the notifications of one transaction into one (a deploy of 10,000
-- schedules wakes each planner once). The WHEN clauses run without entering plpgsql, so the
-- planner's batch updates pay almost nothing for this.
create function kairos_schedules_notify() returns trigger
language plpgsql as $$
begin
    perform pg_notify('kairos_schedules', '');
    return null;
end
$$;

create trigger schedules_notify_insert
    after insert on schedules
    for each row
    when (not new.paused and new.next_run_at is not null)
    execute function kairos_schedules_notify();

create trigger schedules_notify_update
    after update on schedules
    for each row
    when (new.revision is distinct from old.revision
          and not new.paused and new.next_run_at is not null)
    execute function kairos_schedules_notify();
