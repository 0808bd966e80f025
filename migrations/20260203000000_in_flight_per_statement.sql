-- `runs_in_flight` is kept once per statement instead of once per row. The row triggers
-- (20260116000000_partitions.sql, 20260127000000_max_in_flight.sql) entered plpgsql for
-- every exclusive run that entered or left the set and ran three queries and an insert (or a
-- delete) there, one run at a time: a dispatcher wave of 5,000 runs of `skip` schedules made
-- 5,000 calls, and recording it took about 10 s instead of 2 s under `allow` (100,000 minute
-- schedules, three instances). Now each statement's rows that leave the set are deleted in
-- one statement, and those that enter take their slots in one: the limits are checked for
-- the statement's schedules together, and a schedule past its limit fails the statement
-- exactly as before (unique_violation on `schedule_runs_one_in_flight`). The rows of one
-- UPDATE are told apart by (schedule_id, idempotency_key, run_at): a run in flight before and
-- after the statement, of the same schedule, neither leaves nor enters; a row that left and
-- one that entered in the same statement are both applied, the leaving first.
drop trigger schedule_runs_one_in_flight_insert on schedule_runs;
drop trigger schedule_runs_one_in_flight_update on schedule_runs;
drop trigger schedule_runs_one_in_flight_delete on schedule_runs;

create or replace function kairos_one_in_flight() returns trigger
language plpgsql as $$
declare
    gone_s text[];
    gone_k text[];
    came_s text[];
    came_k text[];
    over record;
begin
    if tg_op = 'UPDATE' then
        -- A set difference, not a join: the transition tables have no index and no
        -- statistics, and a join of two waves of 5,000 rows was planned as a nested loop.
        select array_agg(g.schedule_id), array_agg(g.idempotency_key) into gone_s, gone_k
        from (select o.schedule_id, o.idempotency_key, o.run_at from in_flight_old o
              where o.exclusive
                and o.status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING')
              except
              select n.schedule_id, n.idempotency_key, n.run_at from in_flight_new n
              where n.exclusive
                and n.status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING')) g;
        select array_agg(c.schedule_id), array_agg(c.idempotency_key) into came_s, came_k
        from (select n.schedule_id, n.idempotency_key, n.run_at from in_flight_new n
              where n.exclusive
                and n.status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING')
              except
              select o.schedule_id, o.idempotency_key, o.run_at from in_flight_old o
              where o.exclusive
                and o.status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING')) c;
    elsif tg_op = 'DELETE' then
        select array_agg(o.schedule_id), array_agg(o.idempotency_key) into gone_s, gone_k
        from in_flight_old o
        where o.exclusive and o.status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING');
    else
        select array_agg(n.schedule_id), array_agg(n.idempotency_key) into came_s, came_k
        from in_flight_new n
        where n.exclusive and n.status in ('ENQUEUED', 'STARTED', 'RETRYING', 'CANCELLING');
    end if;
    if gone_k is not null then
        delete from runs_in_flight f
        using unnest(gone_s, gone_k) as g(schedule_id, idempotency_key)
        where f.schedule_id = g.schedule_id and f.idempotency_key = g.idempotency_key;
    end if;
    if came_k is null then
        return null;
    end if;
    -- Each schedule's runs entering, its runs already in flight, and its limit (counted, so
    -- a limit lowered below the runs in flight admits nothing until enough end). Every
    -- lookup here is a correlated probe of an index: joined, the statement's rows (no
    -- statistics) were planned against a scan of the whole table.
    select e.schedule_id, e.taken, e.limit_n into over
    from (select c.schedule_id, c.n,
                 (select count(*) from runs_in_flight f
                  where f.schedule_id = c.schedule_id) as taken,
                 coalesce((select s.max_in_flight from schedules s
                           where s.schedule_id = c.schedule_id), 1) as limit_n
          from (select u.schedule_id, count(*) as n from unnest(came_s) as u(schedule_id)
                group by u.schedule_id) c) e
    where e.taken + e.n > e.limit_n
    order by e.schedule_id limit 1;
    if found then
        raise exception 'schedule % already has % run(s) in flight (at most %)',
            over.schedule_id, over.taken, over.limit_n
            using errcode = 'unique_violation',
                  constraint = 'schedule_runs_one_in_flight',
                  table = 'runs_in_flight';
    end if;
    -- The k-th run entering a schedule (in key order) takes its k-th free slot: slot k - 1
    -- when the schedule has none taken (nearly always). Two transactions that race for the
    -- last slot read the same committed rows and so pick the same slot: the primary key
    -- makes the second wait for the first and fail.
    insert into runs_in_flight (schedule_id, idempotency_key, slot)
    select c.schedule_id, c.idempotency_key,
           case when not exists (select 1 from runs_in_flight f
                                 where f.schedule_id = c.schedule_id)
                then c.k - 1
                else (select n from generate_series(0, 999) as n
                      where n <> all (array(select f.slot from runs_in_flight f
                                            where f.schedule_id = c.schedule_id))
                      order by n offset c.k - 1 limit 1)
           end
    from (select u.schedule_id, u.idempotency_key,
                 row_number() over (partition by u.schedule_id order by u.idempotency_key) as k
          from unnest(came_s, came_k) as u(schedule_id, idempotency_key)) c;
    return null;
end
$$;

create trigger schedule_runs_one_in_flight_insert
    after insert on schedule_runs
    referencing new table as in_flight_new
    for each statement execute function kairos_one_in_flight();

create trigger schedule_runs_one_in_flight_update
    after update on schedule_runs
    referencing old table as in_flight_old new table as in_flight_new
    for each statement execute function kairos_one_in_flight();

create trigger schedule_runs_one_in_flight_delete
    after delete on schedule_runs
    referencing old table as in_flight_old
    for each statement execute function kairos_one_in_flight();
