//! Crash points for the kill tests: `KAIROS_CRASH_AT=<name>` makes the process abort (no
//! unwinding, no cleanup, like `kill -9`) when it reaches the named point. Unset in
//! production, where a crash point costs one environment lookup, read once.

use std::sync::OnceLock;

/// The environment variable naming the crash point to abort at.
pub const CRASH_AT_ENV: &str = "KAIROS_CRASH_AT";

/// Aborts the process if `KAIROS_CRASH_AT` names `point`.
pub fn crash_point(point: &str) {
    static TARGET: OnceLock<Option<String>> = OnceLock::new();
    let target = TARGET.get_or_init(|| std::env::var(CRASH_AT_ENV).ok());
    if target.as_deref() == Some(point) {
        eprintln!("kairos: crash point {point:?} reached; aborting");
        std::process::abort();
    }
}
