//! The database's clock decides, also for advice: an instance whose own clock is five
//! minutes behind (libfaketime) previews a spec from the database's `now()`, not its own.

use crate::support;

use std::path::Path;

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use support::Served;

const LIBFAKETIME: [&str; 3] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
];

#[test]
fn a_preview_without_after_starts_at_the_databases_now() {
    let library = LIBFAKETIME
        .iter()
        .find(|path| Path::new(path).exists())
        .expect("libfaketime (Debian package faketime) is installed");
    let log = tempfile::tempfile().expect("log file");
    let skew = [("LD_PRELOAD", *library), ("FAKETIME", "-5m")];
    let served = Served::start_logging("api", "clock_preview", &log, &skew);
    let before = Utc::now();
    let answer = served.send(
        "POST",
        "/schedules/preview",
        r#"{"cron_expr": "* * * * *", "timezone": "UTC", "count": 1}"#,
    );
    assert!(answer.contains(" 200 "), "{answer}");
    let body: Value =
        serde_json::from_str(answer.split("\r\n\r\n").nth(1).expect("a body")).expect("JSON");
    let first: DateTime<Utc> = body["fire_times"][0]
        .as_str()
        .expect("a fire time")
        .parse()
        .expect("RFC 3339");
    // The next whole minute after the database's now (this process's clock is the real
    // one): an instance reading its own clock would answer about five minutes earlier.
    assert!(
        first > before - Duration::seconds(2) && first <= before + Duration::seconds(62),
        "first fire time {first} is not the minute after {before}"
    );
}
