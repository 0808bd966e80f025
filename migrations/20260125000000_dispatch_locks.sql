-- The dispatcher serializes its decisions per exclusive schedule: while one transaction
-- decides and publishes a run of a schedule whose overlap policy allows one run in flight,
-- no other may decide for that schedule, or both could publish a run (invariant 5). It did
-- so with pg_try_advisory_xact_lock, one per schedule per round, held until the round
-- commits. Advisory locks live in PostgreSQL's shared lock table, whose size is
-- max_locks_per_transaction x (max_connections + max_prepared_transactions), about 6,400
-- with the defaults; a burst of 100,000 exclusive schedules takes up to 5,000 per round x
-- 7 lanes x each instance, and the server answered "out of shared memory" (the claims,
-- the records and the sweeps of that moment failed with it). A row lock is kept in the row
-- itself, so any number fits: the dispatcher now locks one row of this table per schedule
-- (`for update skip locked`), with the same meaning (held by one transaction, released at
-- its end, never waited for). Only dispatchers lock these rows, so nothing else (the
-- planner advancing a schedule, an upsert) ever waits for a round.
create table schedule_dispatch_locks (
    schedule_id text primary key
);

insert into schedule_dispatch_locks (schedule_id) select schedule_id from schedules;

-- Every schedule gets its row when it is created. A deleted schedule's row stays (a
-- delete would wait for a round that holds it); `on conflict do nothing` reuses it when the
-- id comes back, and never waits for a round, since the row is committed.
create function kairos_dispatch_lock_row() returns trigger
language plpgsql as $$
begin
    insert into schedule_dispatch_locks (schedule_id) values (new.schedule_id)
    on conflict do nothing;
    return null;
end
$$;

create trigger schedules_dispatch_lock_row
    after insert on schedules
    for each row execute function kairos_dispatch_lock_row();
