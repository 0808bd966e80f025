-- Every priority a run awaiting its launch can have: 0 and each priority a schedule has
-- had (a run takes its schedule's priority when it is written, and again when the schedule's
-- priority changes). The table only grows; a value no run has any more costs a claim one
-- more index descent.
--
-- A dispatcher that has claimed every run due by some time claims next only the runs due
-- after it: `priority = any (<these>) and fire_at > <that time>` starts the claim index
-- `schedule_runs_claim` (priority desc, fire_at, idempotency_key) at that time within each
-- priority, instead of at its first entry: the entries before it are runs other rounds hold
-- or runs already launched whose entries wait for vacuum, and a claim from the start walks
-- past all of them.
create table run_priorities (
    priority integer primary key
);

insert into run_priorities values (0);
insert into run_priorities select distinct priority from schedules on conflict do nothing;
insert into run_priorities select distinct priority from schedule_runs
    where status in ('PENDING', 'RETRYING', 'QUEUED') on conflict do nothing;

create function kairos_note_run_priority() returns trigger language plpgsql as $$
begin
    insert into run_priorities values (new.priority) on conflict do nothing;
    return null;
end $$;

-- Row triggers whose WHEN clause says when there is work: a deploy of schedules at the
-- default priority never enters plpgsql.
create trigger schedules_note_priority_insert after insert on schedules
    for each row when (new.priority <> 0)
    execute function kairos_note_run_priority();

create trigger schedules_note_priority_update after update of priority on schedules
    for each row when (new.priority is distinct from old.priority)
    execute function kairos_note_run_priority();
