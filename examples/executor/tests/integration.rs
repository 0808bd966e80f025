//! The integration tests of kairos-executor-example, in one test binary so that the tree is linked
//! once: each module is one file of `tests/`, and a test's name is `<file>::<test>`.

mod attempts;
mod delivery;
mod executor;
mod python;

mod kairos_support;
mod support;
