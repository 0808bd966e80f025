//! The integration tests of kairos-cli, in one test binary so that the tree is linked
//! once: each module is one file of `tests/`, and a test's name is `<file>::<test>`.

mod admin;
mod clock;
mod conventions;
mod failover;
mod generated_clients;
mod history;
mod logs;
mod otlp;
mod peer_bugs;
mod poolers;
mod preview;
mod runs_cancel;
mod serve;
mod skips_cli;
mod status_partitions;
mod ui_browser_list;
mod ui_browser_runs;
mod ui_browser_schedule;
mod ui_browser_unbroken;

#[path = "support/browser.rs"]
mod browser;
mod support;
