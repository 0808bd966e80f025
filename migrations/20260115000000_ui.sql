-- The operator page's Runs view (`/ui/runs`) lists the newest runs of every schedule, or of
-- one workflow, newest tick first. Without these an index-less sort of the whole history
-- would run on every page load. Both columns are written once when the run is inserted and
-- never updated, so status changes stay heap-only (HOT) updates and the dispatcher's write
-- path is not slowed.
create index schedule_runs_recent on schedule_runs (run_at desc, idempotency_key);

-- The same listing filtered by workflow.
create index schedule_runs_workflow_recent on schedule_runs (workflow_id, run_at desc, idempotency_key);
