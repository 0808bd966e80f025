-- The schedule revision a run's tick was last checked against: set when the planner writes
-- the run, and again whenever a schedule write keeps or revives it. A registrar write never
-- waits for a dispatcher round (it skips the runs a round holds locked, since a round holds
-- its pre-staged runs until their tick); a round publishes a PENDING run only while its
-- schedule is still at the run's revision, and brings one left behind by such a write in
-- line first (cancelled, or kept with its new fire_at). NULL for runs written before this
-- column and for runs the planner did not write: the round then compares the schedule's
-- revision when it claimed the run with the revision now.
alter table schedule_runs add column revision bigint;
