//! The integration tests of kairos-registrar, in one test binary so that the tree is linked
//! once: each module is one file of `tests/`, and a test's name is `<file>::<test>`.

mod paused_ticks;
mod preview_matches_planning;
mod registrar;
mod trigger_race;
