-- When a schedule was paused (NULL while it runs). On resume the registrar counts the ticks
-- of [paused_at, now) as skipped because of the pause (metric kairos_runs_skipped_total
-- {reason="paused"}); they are never planned, because resume plans from now on.
alter table schedules add column paused_at timestamptz;
