-- Issue 12, operator control: chained triggers (`@after <schedule_id> [on ...]`), a limit on
-- scheduled runs (`max_runs`) and pause notes.

-- A chained schedule's parent and the outcome it waits for, as the registrar parsed them from
-- `cron_expr` (NULL for a timetable). Kept as columns so that "the children of this run's
-- schedule" is an index lookup inside the status transition, without parsing specs in SQL.
-- `max_runs` limits the runs the planner creates (NULL: no limit); `scheduled_runs` counts
-- them, added by the planner in the statement that advances `next_run_at`, inside the
-- transaction that inserts the runs and holds the schedule's row lock, so two planners can
-- never exceed the limit. `pause_note` says why a paused schedule is paused (cleared on
-- resume). All are nullable or constant defaults: catalog-only changes.
alter table schedules
    add column chain_parent   text,
    add column chain_on       text check (chain_on in ('success', 'failure', 'always')),
    add column max_runs       integer check (max_runs >= 1),
    add column scheduled_runs bigint not null default 0 check (scheduled_runs >= 0),
    add column pause_note     text check (char_length(pause_note) <= 1000),
    add constraint schedules_chain_whole check ((chain_parent is null) = (chain_on is null));

-- The children of a schedule. Partial: only chained schedules are in it, so timetable
-- schedules (almost all) and the planner's advances pay nothing for it.
create index schedules_chain_parent on schedules (chain_parent) where chain_parent is not null;

-- A chained run records the run that triggered it. Nullable with no default: catalog-only.
-- Source `chain` joins the sources; its key is sha256(child_id ":" parent_key), 64 hex digits
-- like every derived key.
alter table schedule_runs add column parent_key text;
alter table schedule_runs drop constraint schedule_runs_source_check;
alter table schedule_runs add constraint schedule_runs_source_check
    check (source in ('schedule', 'manual', 'backfill', 'api', 'chain'));

-- Chained triggers fire from a trigger on `schedule_runs`, in the transaction (and the
-- statement) that records the parent run's final outcome. A trigger rather than a clause in
-- each statement because final outcomes are written by several statements (the status
-- transition, the timeout and never-started sweeps and their dead-lettering, cancels), and
-- each one must chain. The outcomes, once final:
--   success: the run became SUCCESS;
--   failure: the run was dead-lettered (FAILED or TIMED_OUT with no attempt left; a failure
--            that will be retried does not count);
--   always:  either of those, or CANCELLED after the run was published (a run cancelled
--            before it was launched never ran, so nothing follows it).
-- One child run per (child, parent run): the key makes a repeated outcome (a duplicate
-- report, a manual retry that ends again) create nothing new. Paused children do not fire,
-- and neither do the children of a deleted parent.
-- A run becoming due wakes dispatchers on `kairos_runs`.
create function kairos_chain_fire() returns trigger
language plpgsql as $$
declare
    outcome text;
    at timestamptz;
    fired integer;
begin
    if new.status = 'SUCCESS' and old.status is distinct from 'SUCCESS' then
        outcome := 'success';
        at := coalesce(new.finished_at, now());
    elsif new.dead_lettered_at is not null and old.dead_lettered_at is null then
        outcome := 'failure';
        at := new.dead_lettered_at;
    elsif new.status = 'CANCELLED' and old.status is distinct from 'CANCELLED'
          and new.published_at is not null then
        outcome := 'cancelled';
        at := coalesce(new.finished_at, now());
    else
        return null;
    end if;
    insert into schedule_runs (idempotency_key, schedule_id, run_at, fire_at, status, source,
        workflow_id, version, user_id, parent_key, priority, created_at, updated_at)
    select encode(sha256(convert_to(c.schedule_id || ':' || new.idempotency_key, 'UTF8')),
               'hex'),
           c.schedule_id, date_trunc('second', at), at, 'PENDING', 'chain',
           c.workflow_id, c.version, c.user_id, new.idempotency_key, c.priority, now(), now()
    from schedules c
    where c.chain_parent = new.schedule_id and not c.paused
      and (c.chain_on = 'always' or c.chain_on = outcome)
      -- A deleted parent fires nothing, not even its runs still in flight.
      and exists (select 1 from schedules p where p.schedule_id = new.schedule_id)
    on conflict (idempotency_key) do nothing;
    get diagnostics fired = row_count;
    if fired > 0 then
        perform pg_notify('kairos_runs', '');
    end if;
    return null;
end
$$;

-- The WHEN clause runs without entering plpgsql, so the dispatcher's publishes and every
-- other update that is not a final outcome pay almost nothing for the trigger.
create trigger schedule_runs_chain
    after update on schedule_runs
    for each row
    when ((new.status = 'SUCCESS' and old.status is distinct from 'SUCCESS')
          or (new.dead_lettered_at is not null and old.dead_lettered_at is null)
          or (new.status = 'CANCELLED' and old.status is distinct from 'CANCELLED'
              and new.published_at is not null))
    execute function kairos_chain_fire();
