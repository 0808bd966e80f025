-- A run's own overlap policy, when its request set one (trigger-now and backfill take
-- `overlap_policy`; a backfill defaults to `queue` so that every backfilled tick runs, one
-- after another, in tick order). NULL: the schedule's policy at fire time. Nullable with no
-- default: a catalog-only change.
alter table schedule_runs add column overlap_override text
    check (overlap_override in ('allow', 'skip', 'queue'));
