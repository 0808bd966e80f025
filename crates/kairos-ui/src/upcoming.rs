//! The schedule page's next fire times: each tick in the schedule's zone and in UTC, when it
//! fires with its jitter, the DST rule or roll that placed it, its deadline, and whether an
//! operator skipped it ("skipped by <who>: <note>"); for a deployer, a Skip control with an
//! optional note on each tick, and Take back on a skipped one (the page's script sends them
//! to `POST /schedules/{id}/skips` and `DELETE /schedules/{id}/skips/{run_at}`).

use kairos_core::{DstNote, Occurrence};
use kairos_registrar::{ScheduleDetail, Upcoming};
use maud::{html, Markup};

use crate::time::{is_utc, relative, rfc3339, utc, zoned};
use crate::Viewer;

/// The table of `detail.upcoming`; a sentence when there is none.
pub(crate) fn upcoming(detail: &ScheduleDetail, viewer: Viewer) -> Markup {
    let zone = &detail.schedule.timezone;
    let id = &detail.schedule.schedule_id;
    let jitter = detail.schedule.jitter_ms;
    // A UTC schedule's ticks are said once.
    let utc_zone = is_utc(zone);
    html! {
        @if detail.upcoming.is_empty() {
            p.empty { "No upcoming fire time (exhausted, past its end, or its spec no longer parses)." }
        } @else {
            div.table-wrap { table.upcoming #upcoming {
                thead { tr {
                    th scope="col" { "#" }
                    @if !utc_zone { th scope="col" { "Tick (" (zone) ")" } }
                    th scope="col" { "Tick (UTC)" }
                    th scope="col" { "Fires at (UTC, with jitter)" }
                    th scope="col" { "Note" }
                    @if detail.schedule.deadline_s.is_some() { th scope="col" { "Must be final by (UTC)" } }
                    @if viewer.can_write { th scope="col" { "Skip" } }
                } }
                tbody { @for (i, tick) in detail.upcoming.iter().enumerate() {
                    tr data-run-at=(rfc3339(tick.at)) {
                        td data-label="#" { (i + 1) }
                        @if !utc_zone { td.wrap data-label="In zone" { time datetime=(rfc3339(tick.at)) { (zoned(tick.at, zone)) } } }
                        td data-label="UTC" { (utc(tick.at)) br; small.muted { (relative(tick.at, detail.now)) } }
                        td data-label="Fires at" { (fire_cell(tick, jitter)) }
                        td.note data-label="Note" { (note_cell(tick, zone)) (skip_mark(tick)) }
                        @if let Some(seconds) = detail.schedule.deadline_s {
                            td.deadline data-label="Deadline" {
                                (utc(tick.at + chrono::Duration::seconds(i64::from(seconds))))
                                " " span.mark.deadline { "deadline_s " (seconds) }
                            }
                        }
                        @if viewer.can_write { td.skip-cell data-label="Skip" { (skip_control(id, tick)) } }
                    }
                } }
            } }
        }
    }
}

/// A skipped tick: "skipped by <who>: <note>" (it will not run).
fn skip_mark(tick: &Upcoming) -> Markup {
    html! {
        @if let Some(skip) = &tick.skip {
            span.mark.skipped data-skipped=(rfc3339(skip.run_at)) { (skip.reason()) }
        }
    }
}

/// Skip with an optional note, or Take back on a skipped tick. The script shows the API's
/// problem inside the cell, next to the control.
fn skip_control(id: &str, tick: &Upcoming) -> Markup {
    let at = rfc3339(tick.at);
    html! {
        @if tick.skip.is_some() {
            button.unskip type="button" data-schedule=(id) data-run-at=(at)
                aria-label=(format!("Take back the skip of {}", utc(tick.at))) { "Take back" }
        } @else {
            form.skip-form data-schedule=(id) data-run-at=(at) {
                input name="note" maxlength="1000" placeholder="note (optional)" autocomplete="off"
                    aria-label=(format!("Why skip {} (optional)", utc(tick.at)));
                button.skip-button type="submit" aria-label=(format!("Skip {}", utc(tick.at))) { "Skip" }
            }
        }
    }
}

fn fire_cell(tick: &Upcoming, jitter_ms: i32) -> Markup {
    let offset = (tick.fire_at - tick.at).num_milliseconds();
    html! {
        @if jitter_ms == 0 {
            (utc(tick.fire_at))
        } @else {
            (tick.fire_at.format("%Y-%m-%d %H:%M:%S%.3f UTC"))
            " " span.mark.jitter { "jitter " (format!("{offset:+}")) " ms (±" (jitter_ms) ")" }
        }
    }
}

fn note_cell(tick: &Upcoming, zone: &str) -> Markup {
    html! {
        @match &tick.note.dst {
            Some(DstNote::Shifted { wall, source }) => {
                span.mark.dst { "DST gap: " (wall.format("%H:%M")) " did not exist; shifted to the jump (dst_gap=shift, " (source.as_str()) ")" }
            }
            Some(DstNote::Fold { occurrence, fold, source }) => {
                span.mark.dst { "DST repeated hour: "
                    (match occurrence { Occurrence::First => "first", Occurrence::Second => "second" })
                    " pass (dst_fold=" (fold.to_string()) ", " (source.as_str()) ")" }
            }
            None => {}
        }
        @if let Some(from) = tick.note.rolled_from {
            span.mark.roll { "rolled from " (zoned(from, zone)) }
        }
    }
}
