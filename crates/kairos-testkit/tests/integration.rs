//! The integration tests of kairos-testkit, in one test binary so that the tree is linked
//! once: each module is one file of `tests/`, and a test's name is `<file>::<test>`.

mod nats_server;
