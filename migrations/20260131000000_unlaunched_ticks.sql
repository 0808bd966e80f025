-- Issue 27, run deadlines for ticks that never launched: a tick of a schedule with
-- `deadline_s` that gets no run (a missed tick the catch-up policy drops, or a tick of a
-- schedule that is paused) is written as a SKIPPED run with its deadline, so the sweep
-- judges it late like any other run.

-- Marks a SKIPPED run written for a tick of a paused schedule (the sweep writes it at the
-- tick's time while the schedule stays paused). Such a run was skipped only because of the
-- pause: when a resume plans its tick after all (a pause that ended by itself, caught up
-- per the catch-up policy), the planner turns this very row into the run it plans, keeping
-- its late mark, instead of leaving the tick without a launch. A constant default: a
-- catalog-only change, and no index (the planner finds the row by its primary key).
alter table schedule_runs
    add column paused_skip boolean not null default false;

-- The sweep's look-up of paused schedules with a deadline whose next tick has come (a
-- paused schedule's `next_run_at` is the first tick it has no run for; the sweep moves it
-- past the ticks it writes). Partial: only paused schedules with a deadline are in it, so
-- the planner's advances of running schedules (never paused) pay nothing.
create index schedules_paused_deadline on schedules (next_run_at)
    where paused and deadline_s is not null and next_run_at is not null;
