//! Wall time → instant, with the DST rules of docs/design.md §4 (rules 3, 5, 6) or a schedule's
//! own `dst_gap`/`dst_fold`.
//!
//! The calendar yields matching *wall* times in ascending order; this module maps them to
//! instants in an IANA zone:
//! - a wall time that exists once is one tick;
//! - in an overlap (fall back): `first` fires at the first occurrence only (default for
//!   fixed-time jobs), `last` at the second only, `both` at both (default for wildcard);
//! - in a gap (spring forward): `skip` does not fire (default for wildcard jobs), `shift`
//!   fires at the instant the clocks jumped, provided that instant is on the same local
//!   date (default for fixed-time jobs).
//!
//! Instants are whole epoch seconds. Because an overlap replays wall times, the next tick of
//! a `both` job can be a wall time *earlier* than the current one; [`next_tick`] therefore
//! also looks at the second pass of a backward transition just ahead.

use chrono::{DateTime, Duration, LocalResult, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;

use crate::spec::{Calendar, Days, JobKind};
use crate::{DstFold, DstGap};

/// How a cron job maps wall times that do not exist, or exist twice, to instants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DstPolicy {
    pub(crate) gap: DstGap,
    pub(crate) fold: DstFold,
}

impl DstPolicy {
    /// The rules of docs/design.md §4 for `kind`, each replaced by the schedule's own when set.
    pub(crate) fn of(kind: JobKind, gap: Option<DstGap>, fold: Option<DstFold>) -> DstPolicy {
        let (default_gap, default_fold) = match kind {
            JobKind::FixedTime => (DstGap::Shift, DstFold::First),
            JobKind::Wildcard => (DstGap::Skip, DstFold::Both),
        };
        DstPolicy {
            gap: gap.unwrap_or(default_gap),
            fold: fold.unwrap_or(default_fold),
        }
    }
}

/// Offsets on Earth stay within ±26 h of UTC, so a jump over a wall time lies in this window.
const JUMP_SEARCH: i64 = 26 * 3_600;
/// How far ahead a backward transition is looked for; overlaps last a few hours at most.
const OVERLAP_LOOKAHEAD: i64 = 48 * 3_600;
/// Probe spacing for transitions; no zone has two transitions this close together.
const PROBE_STEP: i64 = 6 * 3_600;

/// The smallest tick of `calendar` (on the dates `days` accepts) in `zone` strictly after
/// the instant `after` (seconds).
pub(crate) fn next_tick(
    calendar: &Calendar,
    policy: DstPolicy,
    days: &dyn Days,
    zone: Tz,
    after: i64,
) -> Option<i64> {
    let first_pass = next_by_wall(calendar, policy, days, zone, after);
    let second_pass = match policy.fold {
        DstFold::Both => replayed_tick(calendar, days, zone, after),
        DstFold::First | DstFold::Last => None,
    };
    match (first_pass, second_pass) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The first tick whose wall time is later than the wall time at `after`.
fn next_by_wall(
    calendar: &Calendar,
    policy: DstPolicy,
    days: &dyn Days,
    zone: Tz,
    after: i64,
) -> Option<i64> {
    let mut from = local(zone, after)? + Duration::seconds(1);
    loop {
        let wall = calendar.first_at_or_after_on(from, days)?;
        match zone.from_local_datetime(&wall) {
            LocalResult::Single(at) if at.timestamp() > after => return Some(at.timestamp()),
            LocalResult::Single(_) => {}
            LocalResult::Ambiguous(first, second) => {
                let (first, second) = (first.timestamp(), second.timestamp());
                match policy.fold {
                    DstFold::First | DstFold::Both if first > after => return Some(first),
                    // Invariant: `first` fires only at the first occurrence of a repeated
                    // wall time, which is already behind us.
                    DstFold::Last | DstFold::Both if second > after => return Some(second),
                    _ => {}
                }
            }
            LocalResult::None => {
                let jump = jump_instant(zone, wall)?;
                let jump_wall = local(zone, jump)?;
                match policy.gap {
                    // Every wall time up to the end of the gap is missing too.
                    DstGap::Skip => {
                        from = jump_wall;
                        continue;
                    }
                    DstGap::Shift if jump_wall.date() == wall.date() && jump > after => {
                        return Some(jump)
                    }
                    // The jump lands on another local date (a skipped day): nothing fires
                    // for this wall time; the jump's own date may still have gap times.
                    DstGap::Shift => {
                        let jump_midnight = jump_wall.date().and_time(chrono::NaiveTime::MIN);
                        from = (wall + Duration::seconds(1)).max(jump_midnight);
                        continue;
                    }
                }
            }
        }
        from = wall + Duration::seconds(1);
    }
}

/// For a `both` job: the first tick in the replayed wall times of a backward transition
/// within the next few hours (those wall times may be earlier than the current one).
fn replayed_tick(calendar: &Calendar, days: &dyn Days, zone: Tz, after: i64) -> Option<i64> {
    let (transition, before, after_offset) = next_backward_transition(zone, after)?;
    let replay_start = naive(transition + after_offset)?;
    let replay_end = naive(transition + before)?;
    let wall = calendar.first_at_or_after_on(replay_start, days)?;
    (wall < replay_end).then(|| wall.and_utc().timestamp() - after_offset)
}

/// `(instant, offset before, offset after)` of the first transition in
/// `(after, after + OVERLAP_LOOKAHEAD]` that turns the clocks back.
fn next_backward_transition(zone: Tz, after: i64) -> Option<(i64, i64, i64)> {
    let mut probe = after;
    let mut probe_offset = offset(zone, probe)?;
    while probe < after + OVERLAP_LOOKAHEAD {
        let next = probe + PROBE_STEP;
        let next_offset = offset(zone, next)?;
        if next_offset != probe_offset {
            let transition = first_with_offset_change(zone, probe, probe_offset, next)?;
            let new_offset = offset(zone, transition)?;
            if new_offset < probe_offset {
                return Some((transition, probe_offset, new_offset));
            }
            probe = transition;
            probe_offset = new_offset;
            continue;
        }
        probe = next;
    }
    None
}

/// The first instant in `(lo, hi]` whose offset differs from `lo_offset`.
fn first_with_offset_change(zone: Tz, mut lo: i64, lo_offset: i64, mut hi: i64) -> Option<i64> {
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if offset(zone, mid)? == lo_offset {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(hi)
}

/// The instant the clocks jumped over the non-existent wall time `wall`: the first instant
/// whose wall time is later than `wall`.
pub(crate) fn jump_instant(zone: Tz, wall: NaiveDateTime) -> Option<i64> {
    let wall_utc = wall.and_utc().timestamp();
    let (mut lo, mut hi) = (wall_utc - JUMP_SEARCH, wall_utc + JUMP_SEARCH);
    // Invariant: local(lo) < wall < local(hi).
    if local(zone, lo)? >= wall || local(zone, hi)? <= wall {
        return None;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if local(zone, mid)? < wall {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(hi)
}

fn naive(seconds: i64) -> Option<NaiveDateTime> {
    DateTime::from_timestamp(seconds, 0).map(|at| at.naive_utc())
}

pub(crate) fn local(zone: Tz, seconds: i64) -> Option<NaiveDateTime> {
    Some(naive(seconds)?.and_utc().with_timezone(&zone).naive_local())
}

fn offset(zone: Tz, seconds: i64) -> Option<i64> {
    let utc = naive(seconds)?;
    Some(i64::from(
        zone.offset_from_utc_datetime(&utc).fix().local_minus_utc(),
    ))
}

/// Converts whole epoch seconds back to an instant.
pub(crate) fn instant(seconds: i64) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(seconds, 0)
}
