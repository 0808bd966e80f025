-- At most N runs in flight (`max_in_flight`, 1 to 1,000) for a schedule under an exclusive
-- overlap policy (`skip`, `queue`, `buffer_one`, `cancel_other`). NULL keeps one, as before;
-- `allow` has no limit and takes no `max_in_flight` (the registrar refuses the pair).
alter table schedules add column max_in_flight integer
    constraint schedules_max_in_flight check (max_in_flight between 1 and 1000);

-- The database enforces the limit as it enforced one in flight: `runs_in_flight` holds one
-- row per in-flight run of an exclusive schedule, in a numbered slot below the schedule's
-- limit, and its primary key (schedule_id, slot) keeps the constraint's old name, so a run
-- past the limit fails exactly as a second in-flight run did: unique_violation (23505) on
-- `schedule_runs_one_in_flight`. The rows there now take slot 0.
alter table runs_in_flight add column slot integer not null default 0;
alter table runs_in_flight drop constraint schedule_runs_one_in_flight;
alter table runs_in_flight
    add constraint schedule_runs_one_in_flight primary key (schedule_id, slot);
create index runs_in_flight_key on runs_in_flight (schedule_id, idempotency_key);

-- A run entering the set takes the lowest free slot below the limit, and fails when the
-- schedule already has its limit in flight (counted, so a limit lowered below the runs in
-- flight admits nothing until enough end). Two transactions that race for the last slot
-- read the same committed rows and so pick the same slot: the primary key makes the second
-- wait for the first and fail. The dispatcher holds the schedule's dispatch lock besides,
-- so this is the guard, not the usual path.
create or replace function kairos_one_in_flight() returns trigger
language plpgsql as $$
declare
    limit_n integer;
    taken integer;
    free_slot integer;
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
            select coalesce(max(s.max_in_flight), 1) into limit_n
            from schedules s where s.schedule_id = new.schedule_id;
            select count(*) into taken from runs_in_flight f
            where f.schedule_id = new.schedule_id;
            select n into free_slot from generate_series(0, limit_n - 1) as n
            where not exists (select 1 from runs_in_flight f
                              where f.schedule_id = new.schedule_id and f.slot = n)
            order by n limit 1;
            if taken >= limit_n or free_slot is null then
                raise exception 'schedule % already has % run(s) in flight (at most %)',
                    new.schedule_id, taken, limit_n
                    using errcode = 'unique_violation',
                          constraint = 'schedule_runs_one_in_flight',
                          table = 'runs_in_flight';
            end if;
            insert into runs_in_flight (schedule_id, idempotency_key, slot)
            values (new.schedule_id, new.idempotency_key, free_slot);
        end if;
    end if;
    return null;
end
$$;
