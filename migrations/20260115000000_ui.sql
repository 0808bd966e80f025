-- The operator page's Runs view (`/ui/runs`) lists the newest runs of every schedule, newest
-- tick first. Without this index an index-less sort of the whole history would run on every
-- page load.
--
-- Its cost: a status change is never a heap-only (HOT) update (status appears in the
-- predicates of the partial indexes), so every full index on this table takes one entry per
-- status change, this one included. That is why there is no second index for the listing
-- filtered by workflow: that filter reads this index and skips other workflows' runs (an
-- admin page's cost, not the dispatcher's).
create index schedule_runs_recent on schedule_runs (run_at desc, idempotency_key);
