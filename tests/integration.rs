//! The integration tests of kairos-e2e, in one test binary so that the tree is linked
//! once: each module is one file of `tests/`, and a test's name is `<file>::<test>`.

mod architecture;
mod asyncapi;
mod conformance_matrix;
mod ha;
mod ops_artifacts;
mod packaging;
mod schemas;
