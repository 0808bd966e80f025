-- The start time-out sweep (`attempts::unstarted`) finds `ENQUEUED` runs published longer ago
-- than their start timeout through `schedule_runs_enqueued`. Its predicate used to be
-- `status = 'ENQUEUED'`. But a statement that names `status = 'ENQUEUED'` also satisfies the
-- predicate of `schedule_runs_in_flight`, and the newest partition's statistics are often
-- taken when few of its runs are in flight. The planner then estimated about one row in
-- either index and chose the in-flight one: a scan of every run in flight (22,034 buffer
-- hits with 100,000 runs just published) to find none, on every instance, every second.
--
-- The predicate is now written `(status = 'ENQUEUED') is true`, which means the same for a
-- column that is never null (status is `not null`). PostgreSQL can use a partial index only
-- when the statement's conditions prove its predicate; the sweep writes exactly this
-- expression, which proves this predicate and not the in-flight one, so its plan cannot
-- depend on when the statistics were taken.
drop index schedule_runs_enqueued;
create index schedule_runs_enqueued on schedule_runs (published_at)
    where (status = 'ENQUEUED') is true;
