-- A run entering the set of runs in flight takes a slot below its schedule's limit
-- (`max_in_flight`, 1 when unset). The function checked the limit, then picked the first
-- free slot of 0 to 999 in a second statement; under read committed each statement reads
-- the rows committed when it starts, so a transaction that committed a run in flight in
-- between made the check pass and the pick choose the next slot: two runs of a schedule
-- limited to one in flight at once, from two status batches written side by side. With
-- every slot below the limit, the primary key (schedule_id, slot) turns that race into a
-- conflict: the second transaction waits for the first and fails.
create or replace function kairos_one_in_flight() returns trigger
language plpgsql as $$
declare
    gone_s text[];
    gone_k text[];
    came_s text[];
    came_k text[];
    slots int[];
    full_s text;
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
    -- The k-th run entering a schedule (in key order) takes its k-th free slot below the
    -- schedule's limit: slot k - 1 when the schedule has none taken (nearly always). The check above and this statement read committed rows at two
    -- moments, so another transaction may take a slot in between; keeping every slot below
    -- the limit makes the primary key the guard: two transactions racing past the limit
    -- reach for the same slot, and the second waits for the first and fails. A run that
    -- finds no free slot below the limit fails the statement as the check does.
    select array_agg(c.schedule_id), array_agg(c.idempotency_key),
           array_agg(case
               when c.k > c.limit_n then null
               when not exists (select 1 from runs_in_flight f
                                where f.schedule_id = c.schedule_id) then c.k - 1
               else (select n from generate_series(0, c.limit_n - 1) as n
                     where n <> all (array(select f.slot from runs_in_flight f
                                           where f.schedule_id = c.schedule_id))
                     order by n offset c.k - 1 limit 1)
           end)
      into came_s, came_k, slots
    from (select u.schedule_id, u.idempotency_key,
                 row_number() over (partition by u.schedule_id
                                    order by u.idempotency_key) as k,
                 coalesce((select s.max_in_flight from schedules s
                           where s.schedule_id = u.schedule_id), 1) as limit_n
          from unnest(came_s, came_k) as u(schedule_id, idempotency_key)) c;
    if array_position(slots, null) is not null then
        full_s := came_s[array_position(slots, null)];
        raise exception 'schedule % has no run slot free (another transaction took the last)',
            full_s
            using errcode = 'unique_violation',
                  constraint = 'schedule_runs_one_in_flight',
                  table = 'runs_in_flight';
    end if;
    insert into runs_in_flight (schedule_id, idempotency_key, slot)
    select * from unnest(came_s, came_k, slots);
    return null;
end
$$;

