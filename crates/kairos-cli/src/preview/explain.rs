//! One explained fire time as a line of `kairos preview --explain`.

use chrono::SecondsFormat;
use kairos_core::{DstNote, Occurrence, TickExplained};

/// `<at>  wall <wall time> <offset>[  <note>]...`: the DST rule that placed it, a roll, the
/// jitter.
pub(super) fn line(tick: &TickExplained) -> String {
    let mut line = format!(
        "{}  wall {} {}",
        tick.at.to_rfc3339_opts(SecondsFormat::Secs, true),
        tick.wall.format("%Y-%m-%dT%H:%M:%S"),
        tick.utc_offset()
    );
    match &tick.note.dst {
        Some(DstNote::Shifted { wall, source }) => line.push_str(&format!(
            "  DST gap: {} did not exist, shifted to the jump ({})",
            wall.format("%H:%M:%S"),
            source.as_str()
        )),
        Some(DstNote::Fold {
            occurrence, source, ..
        }) => {
            let pass = match occurrence {
                Occurrence::First => "first",
                Occurrence::Second => "second",
            };
            line.push_str(&format!(
                "  repeated hour: {pass} pass ({})",
                source.as_str()
            ));
        }
        None => {}
    }
    if let Some(from) = tick.note.rolled_from {
        line.push_str(&format!(
            "  rolled from {}",
            from.to_rfc3339_opts(SecondsFormat::Secs, true)
        ));
    }
    if !tick.jitter.is_zero() {
        line.push_str(&format!(
            "  jittered {:+} ms, fires {}",
            tick.jitter.num_milliseconds(),
            tick.fire_at.to_rfc3339_opts(SecondsFormat::Millis, true)
        ));
    }
    line
}
