-- Issue 27, run deadlines: a schedule may say by when the run of each tick must be final
-- (`run_at + deadline_s`). A run that misses it is marked late (a mark, not a status: the
-- run is never killed); the sweeper marks it, on the database clock.

-- The schedule's rule, in seconds after the tick (NULL: no deadline). At most a year, the
-- bound the registrar checks, so `run_at + deadline_s` always stays a valid instant. Nullable
-- with no default: a catalog-only change.
alter table schedules add column deadline_s integer
    check (deadline_s between 1 and 31536000);

-- A run's deadline is fixed when the planner writes its tick (`run_at + deadline_s` of the
-- schedule at that time), so a later change of the schedule does not move the deadline of a
-- tick already planned, and the sweep needs no join to find due deadlines.
-- `deadline_open` is true from then until the sweep has judged the run and, if it is late,
-- seen it final: only such runs are in the sweep's partial index below, so runs without a
-- deadline (almost all) and runs already judged cost the sweep nothing, at any rate of
-- runs. `late_at` is when the sweep found the run late, `late_reason` why (what the run did
-- by its deadline). Nullable or constant defaults: catalog-only changes.
alter table schedule_runs
    add column deadline_at   timestamptz,
    add column deadline_open boolean not null default false,
    add column late_at       timestamptz,
    add column late_reason   text,
    add constraint schedule_runs_deadline_open check (not deadline_open or deadline_at is not null);

-- The sweep visits only runs whose deadline is open, oldest deadline first; once a run is
-- judged on time, or late and final, it leaves the index. Late runs still unfinished stay
-- in it: they are what the `kairos_runs_overdue` gauge counts.
create index schedule_runs_deadline_open on schedule_runs (deadline_at)
    where deadline_open;

-- `GET /runs?late=true`, newest mark first (keyset pagination). Partial: only late runs.
create index schedule_runs_late on schedule_runs (late_at, idempotency_key)
    where late_at is not null;
