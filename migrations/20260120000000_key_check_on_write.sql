-- The shape of a run's key (20260103000000_dispatcher.sql) is checked when the key is
-- written, and only then. As a CHECK constraint it was evaluated again on every UPDATE of
-- the row, whatever the update changed, and it was the costliest part of recording a batch
-- as ENQUEUED after the writes themselves: 100,000 due runs claimed and recorded in
-- batches of 2,000 took 2.85 s of the database's time with it and 2.25 s without (every
-- status report paid it too). The key is the primary key and no statement changes it, so a
-- row trigger before an INSERT, or an UPDATE that names the key or the source, checks
-- exactly what the constraint did, under the same name and error code.
alter table schedule_runs drop constraint schedule_runs_idempotency_key_check;

create function kairos_run_key_check() returns trigger
language plpgsql as $$
begin
    if not (case when new.source = 'api'
                then new.idempotency_key ~ '^[A-Za-z0-9_-]{1,200}$'
                     and new.idempotency_key !~ '^[0-9a-f]{64}$'
                else new.idempotency_key ~ '^[0-9a-f]{64}$'
            end) then
        raise exception 'new row for relation "schedule_runs" violates check constraint "%"',
            'schedule_runs_idempotency_key_check'
            using errcode = 'check_violation',
                  constraint = 'schedule_runs_idempotency_key_check',
                  table = 'schedule_runs';
    end if;
    return new;
end
$$;

create trigger schedule_runs_key_check
    before insert or update of idempotency_key, source on schedule_runs
    for each row execute function kairos_run_key_check();
