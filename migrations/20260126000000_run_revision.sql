-- The schedule revision a run's tick was last checked against: set when the planner writes
-- the run, and again whenever a schedule write keeps or revives it. A registrar write never
-- waits for a dispatcher round (it skips the runs a round holds locked, since a round holds
-- its pre-staged runs until their tick); a round publishes a PENDING run only while its
-- schedule is still at the run's revision, and brings one left behind by such a write in
-- line first (cancelled, or kept with its new fire_at). NULL only for runs of no schedule
-- (the run launcher's).
alter table schedule_runs add column revision bigint;

-- The runs not yet published take their schedule's revision now; a run written without one
-- (a trigger-now, a backfill, a chained run: every writer but the planner, which sets it)
-- takes its schedule's revision as it is written.
update schedule_runs r set revision = s.revision from schedules s
 where s.schedule_id = r.schedule_id and r.status in ('PENDING', 'QUEUED');

create function kairos_run_revision() returns trigger language plpgsql as $$
begin
    new.revision := (select s.revision from schedules s where s.schedule_id = new.schedule_id);
    return new;
end $$;

create trigger schedule_runs_revision before insert on schedule_runs
    for each row when (new.revision is null) execute function kairos_run_revision();

-- Which schedules each write changed, and in which transaction: a dispatcher round reads,
-- before each wave, only the writes its claim could not have seen (not visible in the
-- snapshot it took before claiming), instead of reading the revision of every schedule of
-- the wave at the tick. One row per statement (transition tables), so a deploy of 100,000
-- schedules is one row. Rows older than ten minutes are of no use to any round (a round
-- holds its runs for the pre-staging lead) and are deleted by the next write.
create table schedule_writes (
    xid          xid8 not null default pg_current_xact_id(),
    written_at   timestamptz not null default now(),
    schedule_ids text[] not null
);

create function kairos_schedule_writes() returns trigger language plpgsql as $$
declare
    ids text[];
begin
    if tg_op = 'UPDATE' then
        select array_agg(n.schedule_id) into ids
        from changed_new n join changed_old o on o.schedule_id = n.schedule_id
        where n.revision is distinct from o.revision;
    elsif tg_op = 'INSERT' then
        select array_agg(schedule_id) into ids from changed_new;
    else
        select array_agg(schedule_id) into ids from changed_old;
    end if;
    if ids is not null then
        delete from schedule_writes where ctid in (
            select ctid from schedule_writes where written_at < now() - interval '10 minutes'
            for update skip locked);
        insert into schedule_writes (schedule_ids) values (ids);
    end if;
    return null;
end $$;

create trigger schedules_written_update after update on schedules
    referencing old table as changed_old new table as changed_new
    for each statement execute function kairos_schedule_writes();
create trigger schedules_written_insert after insert on schedules
    referencing new table as changed_new
    for each statement execute function kairos_schedule_writes();
create trigger schedules_written_delete after delete on schedules
    referencing old table as changed_old
    for each statement execute function kairos_schedule_writes();
