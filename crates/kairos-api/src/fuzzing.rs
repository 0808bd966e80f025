//! Entry points for the fuzz targets (`fuzz/` at the project root): every JSON request body
//! read exactly as its handler reads it (the same functions), then checked by the
//! registrar's and the intake's rules that need no database. Not part of the API.

use kairos_registrar::fuzzing as checks;
use kairos_registrar::Settings;
use serde_json::Value;

/// The bodies the API accepts, one per route that reads JSON.
pub const BODIES: [&str; 11] = [
    "upsert", "pause", "preview", "trigger", "backfill", "calendar", "deploy", "status", "start",
    "cancel", "retry",
];

/// Reads `bytes` as the body of `BODIES[which % BODIES.len()]`, as the route does (the body
/// limit aside), and checks what it read. Returns whether it was accepted; refusals are
/// fine, a panic is the bug being looked for.
pub fn read_body(which: usize, bytes: &[u8]) -> bool {
    let settings = Settings::default();
    let Ok(body) = serde_json::from_slice::<Value>(bytes) else {
        return false;
    };
    let accepted = match BODIES[which % BODIES.len()] {
        "upsert" => crate::schedules::read_upsert(body)
            .map(|input| checks::check_schedule(&input, &settings).is_empty()),
        "pause" => crate::schedules::read_pause(body).map(|_| true),
        "preview" => crate::schedules::read_preview(body)
            .map(|(input, _)| checks::preview(&input, &settings).is_ok()),
        "trigger" => crate::schedules::trigger::read_trigger(body).map(|_| true),
        "backfill" => crate::schedules::backfill::read_backfill(body).map(|_| true),
        "calendar" => crate::calendars::read_calendar("fuzz".into(), body)
            .map(|input| checks::check_calendar(&input).is_empty()),
        "deploy" => crate::workflows::read_deploy("fuzz", 1, body)
            .map(|input| checks::check_workflow(&input, &settings).is_empty()),
        "status" => Ok(kairos_worker::intake::parse_report("fuzz-key", &body).is_ok()),
        "start" => crate::run_launcher::read_start(body).map(|_| true),
        "cancel" => crate::runs::read_cancel(body).map(|_| true),
        _ => crate::runs::read_retry(body).map(|_| true),
    };
    matches!(accepted, Ok(true))
}
