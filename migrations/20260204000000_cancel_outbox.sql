-- The cancel outbox: one row per `CANCELLING` run, kept by a row trigger in the transaction
-- that moves the run in or out of `CANCELLING` (or deletes it), under the run's row lock.
-- The two cancel sweeps (unsent messages, time-outs) read it, not `schedule_runs`.
--
-- They used to find their runs through `schedule_runs_cancelling`, a partial index of
-- `schedule_runs`. But every statement that names `status = 'CANCELLING'` also satisfies the
-- predicate of `schedule_runs_in_flight`, and the newest partition's statistics are taken
-- at some moment of the minute, often when few runs are in flight. The planner then
-- estimated one row either way and chose the in-flight index, whose correlation made it
-- look cheaper: a scan of every run in flight (16,962 buffer hits under load) to find none.
-- This table holds only the runs being cancelled, so a sweep with none reads one page, and
-- `schedule_runs_cancelling`, which nothing else reads, is dropped.
create table run_cancels (
    idempotency_key text not null,
    run_at timestamptz not null,
    requested_at timestamptz not null,
    sent_at timestamptz,
    primary key (idempotency_key, run_at)
);

create or replace function kairos_run_cancels() returns trigger
language plpgsql as $$
begin
    if tg_op = 'UPDATE' and new.status = 'CANCELLING' then
        insert into run_cancels (idempotency_key, run_at, requested_at, sent_at)
        values (new.idempotency_key, new.run_at,
                coalesce(new.cancel_requested_at, new.updated_at), new.cancel_sent_at)
        on conflict (idempotency_key, run_at) do update
            set requested_at = excluded.requested_at, sent_at = excluded.sent_at;
    else
        delete from run_cancels
        where idempotency_key = old.idempotency_key and run_at = old.run_at;
    end if;
    return null;
end
$$;

-- The WHEN clauses keep every other row out of plpgsql: the intake's and the dispatcher's
-- statements of thousands of rows pay one comparison per row.
create trigger schedule_runs_cancels_update
    after update on schedule_runs
    for each row
    when ((old.status = 'CANCELLING' or new.status = 'CANCELLING')
          and (old.status is distinct from new.status
               or old.cancel_requested_at is distinct from new.cancel_requested_at
               or old.cancel_sent_at is distinct from new.cancel_sent_at))
    execute function kairos_run_cancels();

create trigger schedule_runs_cancels_delete
    after delete on schedule_runs
    for each row
    when (old.status = 'CANCELLING')
    execute function kairos_run_cancels();

-- No run is inserted as `CANCELLING`; the rows that are so now enter the outbox here.
insert into run_cancels (idempotency_key, run_at, requested_at, sent_at)
select idempotency_key, run_at, coalesce(cancel_requested_at, updated_at), cancel_sent_at
from schedule_runs where status = 'CANCELLING';

drop index schedule_runs_cancelling;
