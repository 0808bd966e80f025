-- A dispatcher wave's launches are recorded `ENQUEUED` and committed before they are
-- published, so an executor's report never finds its run held by the round that launched
-- it. Until the wave's publishes are acknowledged, one row here names its runs (key and
-- attempt); the dispatcher deletes it once every acknowledgement came in and every failed
-- publish was put back. A row still here after the sweeper's grace period belongs to a
-- dispatcher that died between its commit and that point: the sweeper publishes the runs
-- still `ENQUEUED` again under their own `Nats-Msg-Id` (the stream's duplicate window
-- drops those already stored) and deletes the row.
create table launch_waves (
    wave_id bigint generated always as identity primary key,
    recorded_at timestamptz not null default now(),
    -- The `run_at` span of the wave's runs: `schedule_runs` is partitioned by it.
    run_first timestamptz not null,
    run_last timestamptz not null,
    keys text[] not null,
    attempts int4[] not null,
    check (cardinality(keys) = cardinality(attempts))
);

create index launch_waves_recorded on launch_waves (recorded_at);
