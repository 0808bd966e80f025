//! The integration tests of kairos-launcher, in one test binary so that the tree is linked
//! once: each module is one file of `tests/`, and a test's name is `<file>::<test>`.

mod cloudevents;
mod conformance;
mod namespaces;
mod replicas;
mod status_subject;
mod wire;

mod support;
