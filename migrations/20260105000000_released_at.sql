-- When a QUEUED run was released to PENDING (NULL for a run that was never queued). The
-- launch deadline counts from here for a released run, not from its fire_at: a run that
-- waited behind a long one has an old fire_at, and counting from it failed every run the
-- queue released ("launch deadline passed"), so the queue never drained. Nullable with no
-- default: a catalog-only change.
alter table schedule_runs add column released_at timestamptz;
