-- Regions (docs/regions.md). A schedule may name the region its runs launch in and an
-- ordered list of fallback regions; a run records the region its launch went to, decided
-- once when the launch is recorded and kept for every later publish of the run, so a run
-- never reaches the executors of two regions.
alter table schedules
    add column region text
        constraint schedules_region check (region ~ '^[a-z][a-z0-9-]{0,31}$'),
    add column fallback_regions text[] not null default '{}'
        constraint schedules_fallback_regions check (
            cardinality(fallback_regions) <= 16
            and (cardinality(fallback_regions) = 0 or region is not null)
            and not (region = any (fallback_regions)));

-- No default: adding the column rewrites nothing, and every existing run keeps null (it
-- launched, or launches, on the stream without a region).
alter table schedule_runs add column launch_region text;
