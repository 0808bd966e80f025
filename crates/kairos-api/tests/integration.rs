//! The integration tests of kairos-api, in one test binary so that the tree is linked
//! once: each module is one file of `tests/`, and a test's name is `<file>::<test>`.

mod api_fuzz;
mod auth_matrix;
mod bad_input;
mod calendars;
mod cancel;
mod control;
mod created;
mod deadlines;
mod failure_policy;
mod history;
mod history_pages;
mod metrics;
mod next_fire;
mod openapi;
mod peer_bugs;
mod regions;
mod request_guard;
mod routes;
mod run_logs;
mod run_status;
mod runs_list;
mod schedule_stats;
mod secrets;
mod serve_limits;
mod skips;
mod trigger_backfill;
mod ui;
mod ui_deadlines;
mod ui_history;
mod ui_overview;
mod ui_run;
mod ui_search;
mod ui_skips;
mod workflows_list;

mod common;
mod history_support;
