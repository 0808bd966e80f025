//! The integration tests of kairos-store, in one test binary so that the tree is linked
//! once: each module is one file of `tests/`, and a test's name is `<file>::<test>`.

mod attempt_history;
mod cancel_outbox;
mod change_history;
mod claim_after;
mod claim_locks;
mod claim_scope;
mod constraints;
mod dispatch_locks;
mod history;
mod next_due;
mod partitions;
mod row_types;
mod settings;
mod status_groups;
mod status_lock;
mod status_partitions;
mod sweep_plans;
mod update;

mod support;
