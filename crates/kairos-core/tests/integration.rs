//! The integration tests of kairos-core, in one test binary so that the tree is linked
//! once: each module is one file of `tests/`, and a test's name is `<file>::<test>`.

mod calendar_properties;
mod calendar_vectors;
mod calendars;
mod dst_properties;
mod min_gap;
mod plan;
mod plan_dropped;
mod syntax;
mod vectors;

mod zones;
