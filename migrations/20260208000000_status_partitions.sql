-- Who consumes which partition of the status stream, when the NATS server maps status
-- subjects onto partitions (`nats.status_partitions`): every report of a run then reaches
-- one instance, which folds a run's reports into one write and never finds the run held by
-- another instance's batch.
--
-- `status_members` has one row per instance running the status role, renewed while it
-- lives; the live members share the partitions evenly. `status_partitions` has one row per
-- partition taken: its owner consumes it until `lease_until`, renewing the lease while it
-- lives. A partition whose lease ran out (its owner died) is free again.
create table status_members (
    member     text primary key,
    seen_until timestamptz not null
);

create table status_partitions (
    partition   integer primary key check (partition >= 0),
    owner       text not null,
    lease_until timestamptz not null
);
