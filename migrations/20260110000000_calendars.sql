-- Issue 14: exclusions, named holiday calendars, business-day rolling and a per-schedule
-- DST policy (DESIGN.md §3 "calendars", §4 "Policies").

-- Named calendars: a set of excluded dates shared by many schedules. The dates are one
-- array column because they are always read and written whole (a PUT replaces them, the
-- planner loads the calendars a batch names in one statement); 10,000 dates is 40 KB.
create table calendars (
    name        text primary key,
    description text not null default '',
    dates       date[] not null,
    revision    bigint not null default 1,
    created_at  timestamptz not null default now(),
    updated_at  timestamptz not null default now(),
    check (cardinality(dates) <= 10000)
);

-- A schedule's calendar rules live on its row, so the planner's claim reads them without a
-- join. None of these columns is indexed: every index on `schedules` is written on every
-- advance (DESIGN.md §7). `exclude` and `exclude_calendars` are jsonb arrays of strings
-- (a bulk write binds one per row, which a ragged text[][] cannot hold). `dst_gap` and
-- `dst_fold` are NULL when the schedule keeps the rules of DESIGN.md §4 for its kind.
alter table schedules
    add column exclude           jsonb not null default '[]'
                                 check (jsonb_typeof(exclude) = 'array'),
    add column exclude_calendars jsonb not null default '[]'
                                 check (jsonb_typeof(exclude_calendars) = 'array'),
    add column roll              text not null default 'none'
                                 check (roll in ('none', 'forward', 'backward')),
    add column dst_gap           text check (dst_gap in ('shift', 'skip')),
    add column dst_fold          text check (dst_fold in ('first', 'last', 'both'));

-- Which schedules use which calendar: a side table that advances never touch, so "re-plan
-- every schedule that uses this calendar" and "refuse to delete a calendar in use" are index
-- lookups, not a scan of `schedules`, and cost the planner nothing. The foreign key to
-- `calendars` (restrict) makes a delete of a used calendar fail even if a caller forgot to
-- check; the one to `schedules` (cascade) drops a deleted schedule's rows.
create table schedule_calendars (
    calendar_name text not null references calendars (name) on delete restrict,
    schedule_id   text not null references schedules (schedule_id) on delete cascade,
    primary key (calendar_name, schedule_id)
);

-- Replacing a schedule's calendar set, and the cascade on schedule delete, look rows up by
-- schedule.
create index schedule_calendars_schedule on schedule_calendars (schedule_id);
