-- What executors report of each attempt's output: a link to the attempt's logs in the
-- executor's own systems, and the tail of its output (kairos keeps the last 16 KiB). One
-- row per attempt that reported either; the newest report's value of each replaces the
-- one before. Deleted with its run by retention.
create table run_logs (
    idempotency_key text not null,
    attempt         integer not null check (attempt >= 1),
    log_url         text,
    output          text,
    updated_at      timestamptz not null,
    primary key (idempotency_key, attempt)
);
