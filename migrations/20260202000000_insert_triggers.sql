-- The planner writes every scheduled run (100,000 at the top of the minute for 100,000
-- minute schedules), and two row triggers entered plpgsql for each one: the key check, and
-- the stamp of `schedule_revision`. Both now say in their WHEN clause when there is work
-- (evaluated without entering plpgsql): the key check only for a key of the wrong shape
-- (its function raises the same error as before), the stamp only when the run is not written
-- with `schedule_revision` equal to `revision` (the planner writes both; every other
-- writer leaves it to the trigger, as before).
drop trigger schedule_runs_key_check on schedule_runs;
create trigger schedule_runs_key_check
    before insert or update of idempotency_key, source on schedule_runs
    for each row
    when (not (case when new.source = 'api'
                   then new.idempotency_key ~ '^[A-Za-z0-9_-]{1,200}$'
                        and new.idempotency_key !~ '^[0-9a-f]{64}$'
                   else new.idempotency_key ~ '^[0-9a-f]{64}$'
               end))
    execute function kairos_run_key_check();

drop trigger schedule_runs_stamp_schedule_revision on schedule_runs;
create trigger schedule_runs_stamp_schedule_revision before insert on schedule_runs
    for each row when (new.schedule_revision is distinct from new.revision)
    execute function kairos_run_schedule_revision();
