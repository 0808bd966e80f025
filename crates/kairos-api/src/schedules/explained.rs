//! The explained fire times of `GET /schedules/{id}?explain=true` and `POST
//! /schedules/preview`: each tick's wall time, offset, DST rule, roll, jitter, skip and
//! deadline, and a paused schedule's pause, as typed bodies.

use chrono::{DateTime, Duration, Utc};
use kairos_core::{DstNote, Occurrence, TickExplained, TickNote};
use kairos_registrar::{rfc3339, Schedule, Skip};
use serde::Serialize;

/// One fire time's note: `{at, rolled_from?, dst?}`.
#[derive(Debug, Serialize)]
pub(crate) struct NoteBody {
    at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    rolled_from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dst: Option<DstBody>,
}

/// The DST rule a fire time followed: a wall time that did not exist (`dst_gap=shift`,
/// with the wall time asked for) or one that happened twice (`dst_fold=…`, which of the
/// two).
#[derive(Debug, Serialize)]
pub(crate) struct DstBody {
    rule: String,
    source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    wall_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    occurrence: Option<&'static str>,
    note: &'static str,
}

impl NoteBody {
    pub(crate) fn of(note: TickNote) -> NoteBody {
        let dst = note.dst.map(|dst| match dst {
            DstNote::Shifted { wall, source } => DstBody {
                rule: "dst_gap=shift".into(),
                source: source.as_str(),
                wall_time: Some(wall.format("%Y-%m-%dT%H:%M:%S").to_string()),
                occurrence: None,
                note: "the wall time did not exist; fired when the clocks jumped",
            },
            DstNote::Fold {
                occurrence,
                fold,
                source,
            } => DstBody {
                rule: format!("dst_fold={fold}"),
                source: source.as_str(),
                wall_time: None,
                occurrence: Some(match occurrence {
                    Occurrence::First => "first",
                    Occurrence::Second => "second",
                }),
                note: "the wall time happened twice",
            },
        });
        NoteBody {
            at: rfc3339(note.at),
            rolled_from: note.rolled_from.map(rfc3339),
            dst,
        }
    }
}

/// A skipped tick's skip: who, why, and the sentence the page shows.
#[derive(Debug, Serialize)]
struct SkippedBody {
    skipped_by: String,
    note: Option<String>,
    reason: String,
}

/// One upcoming time explained: `{at, wall_time, utc_offset, fire_at, jitter_ms,
/// rolled_from?, dst?, skipped?, deadline_at?}`.
#[derive(Debug, Serialize)]
pub(crate) struct TickBody {
    #[serde(flatten)]
    note: NoteBody,
    wall_time: String,
    utc_offset: String,
    fire_at: String,
    jitter_ms: i64,
    /// When the tick is one of the schedule's skips: it will not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<SkippedBody>,
    /// The tick plus the schedule's `deadline_s`, when it sets one.
    #[serde(skip_serializing_if = "Option::is_none")]
    deadline_at: Option<String>,
}

impl TickBody {
    /// `tick`, marked skipped when it is one of `skips`, with its deadline under
    /// `deadline_s`.
    pub(crate) fn of(tick: TickExplained, skips: &[Skip], deadline_s: Option<i32>) -> TickBody {
        let at = tick.note.at;
        let skipped = skips
            .iter()
            .find(|skip| skip.run_at == at)
            .map(|skip| SkippedBody {
                skipped_by: skip.skipped_by.clone(),
                note: skip.note.clone(),
                reason: skip.reason(),
            });
        TickBody {
            wall_time: tick.wall.format("%Y-%m-%dT%H:%M:%S").to_string(),
            utc_offset: tick.utc_offset(),
            fire_at: rfc3339(tick.fire_at),
            jitter_ms: tick.jitter.num_milliseconds(),
            note: NoteBody::of(tick.note),
            skipped,
            deadline_at: deadline_s.map(|s| rfc3339(at + Duration::seconds(i64::from(s)))),
        }
    }
}

/// A paused schedule's pause, as its explained preview shows it: `{paused_by, note, until,
/// reason}`, the reason saying what the pause does to the fire times shown.
#[derive(Debug, Serialize)]
pub(crate) struct ExplainedPause {
    paused_by: Option<String>,
    note: Option<String>,
    until: Option<String>,
    reason: String,
}

impl ExplainedPause {
    /// `schedule`'s pause; `None` when it is not paused.
    pub(crate) fn of(schedule: &Schedule) -> Option<ExplainedPause> {
        if !schedule.paused {
            return None;
        }
        let by = schedule.paused_by.as_deref().unwrap_or("anonymous");
        let why = schedule
            .pause_note
            .as_deref()
            .map(|n| format!(": {n}"))
            .unwrap_or_default();
        let catchup = schedule.catchup_policy.as_str();
        let reason = match schedule.paused_until {
            Some(until) => format!(
                "paused until {} by {by}{why}; the fire times start there, the ticks before \
                 it are missed, and on resume catch-up {catchup} decides which of them run",
                rfc3339(until),
            ),
            None => format!(
                "paused by {by}{why}, until resumed: none of these fire times fires unless \
                 the schedule is resumed before it, and on resume catch-up {catchup} decides \
                 which missed ticks run",
            ),
        };
        Some(ExplainedPause {
            paused_by: schedule.paused_by.clone(),
            note: schedule.pause_note.clone(),
            until: schedule.paused_until.map(rfc3339),
            reason,
        })
    }
}

/// A time a preview leaves out: `{at, by}` (an exclusion or calendar) or `{at, why}` (outside
/// the window).
#[derive(Debug, Serialize)]
pub(crate) struct LeftOutBody {
    pub(crate) at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) why: Option<&'static str>,
}

impl LeftOutBody {
    pub(crate) fn excluded(at: DateTime<Utc>, by: String) -> LeftOutBody {
        LeftOutBody {
            at: rfc3339(at),
            by: Some(by),
            why: None,
        }
    }

    pub(crate) fn outside(at: DateTime<Utc>, why: &'static str) -> LeftOutBody {
        LeftOutBody {
            at: rfc3339(at),
            by: None,
            why: Some(why),
        }
    }
}
