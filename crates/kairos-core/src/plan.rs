//! The planner's decision for one claimed schedule, as a pure function (docs/design.md §4
//! "Policies"): which ticks in `[next_run_at, now + lookahead]` become runs, when each fires,
//! how many were missed, and where `next_run_at` moves.
//!
//! - A tick older than `now - misfire_grace` is *missed*. `none`: not fired, counted.
//!   `fire_immediately`: fired now, oldest first, at most `max_catchup_per_pass` per pass.
//!   `spread`: fired spread evenly across the lookahead window. Either way only the newest
//!   `max_catchup` missed ticks are candidates; older ones are counted as missed.
//! - A tick within the grace fires normally (late); a future tick fires at `run_at + jitter`.
//! - Keys always come from `run_at`; jitter from the key.
//! - [`plan_keeping_dropped`] also returns the newest missed ticks it drops (at most
//!   [`MAX_DROPPED_KEPT`] per pass; the rest are only counted), for a schedule whose ticks
//!   have a deadline: each becomes a `SKIPPED` run, late once its deadline passes.

use std::collections::VecDeque;

use chrono::{DateTime, Duration, Utc};

use crate::{jitter_offset, CatchupPolicy, RunKey, Timetable};

/// Most missed ticks enumerated one by one in a pass; past it the planner jumps to the
/// present and reports the count as a lower bound (a year of `* * * * * *` is 31 M ticks).
pub const MAX_MISSED_ENUMERATED: u64 = 100_000;

/// Most dropped missed ticks [`plan_keeping_dropped`] returns for one schedule in one pass:
/// the newest ones; older ones are only counted in [`Plan::missed`], as every dropped tick of
/// a schedule without a deadline is.
pub const MAX_DROPPED_KEPT: usize = 1_000;

/// The pass-wide knobs (from `[scheduler]` config).
#[derive(Debug, Clone, Copy)]
pub struct PlanParams {
    /// The database's `now()` for this pass.
    pub now: DateTime<Utc>,
    /// How far ahead ticks are planned.
    pub lookahead: Duration,
    /// How late a tick may be and still fire normally.
    pub misfire_grace: Duration,
    /// Newest missed ticks a schedule may catch up on (older ones are dropped).
    pub max_catchup: u32,
    /// Catch-up runs created for one schedule in one pass (`fire_immediately`).
    pub max_catchup_per_pass: u32,
}

/// The schedule being planned.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    /// Its id (keys are derived from it).
    pub schedule_id: &'a str,
    /// When it fires.
    pub timetable: &'a Timetable,
    /// The stored next tick (the first tick not yet planned).
    pub next_run_at: DateTime<Utc>,
    /// Jitter bound in milliseconds.
    pub jitter_ms: u32,
    /// What to do with missed ticks.
    pub catchup: CatchupPolicy,
}

/// One run to insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedRun {
    /// The tick.
    pub run_at: DateTime<Utc>,
    /// When it should be dispatched.
    pub fire_at: DateTime<Utc>,
    /// Its idempotency key.
    pub key: RunKey,
    /// Whether it is a catch-up of a missed tick.
    pub catchup: bool,
}

/// Why a missed tick was dropped (not fired).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// The catch-up policy is `none`.
    CatchupNone,
    /// Older than the newest `max_catchup` missed ticks.
    OlderThanMaxCatchup,
    /// More than [`MAX_MISSED_ENUMERATED`] ticks behind: none is caught up.
    TooFarBehind,
}

impl DropReason {
    /// The reason a run of the tick records.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::CatchupNone => "missed: catch-up none",
            DropReason::OlderThanMaxCatchup => "missed: older than max_catchup",
            DropReason::TooFarBehind => "missed: too far behind to catch up",
        }
    }
}

/// A missed tick the plan dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedTick {
    /// The tick.
    pub run_at: DateTime<Utc>,
    /// Its idempotency key (the one a run of it would have).
    pub key: RunKey,
    /// Why it was not fired.
    pub reason: DropReason,
}

/// The outcome of planning one schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Runs to insert (`on conflict do nothing`), in `run_at` order.
    pub runs: Vec<PlannedRun>,
    /// Missed ticks not fired (policy `none`, or older than `max_catchup`).
    pub missed: u64,
    /// `missed` is a lower bound: more than [`MAX_MISSED_ENUMERATED`] were skipped over.
    pub missed_truncated: bool,
    /// The newest dropped missed ticks, oldest first ([`plan_keeping_dropped`] only; empty
    /// from [`plan`]). Each is also counted in `missed`.
    pub dropped: Vec<DroppedTick>,
    /// The first tick not planned; `None` when the schedule is exhausted.
    pub next_run_at: Option<DateTime<Utc>>,
}

/// Plans one schedule for one pass.
pub fn plan(input: PlanInput<'_>, params: PlanParams) -> Plan {
    plan_keeping_dropped(input, params, 0)
}

/// [`plan`], also returning in [`Plan::dropped`] the newest `keep` (at most
/// [`MAX_DROPPED_KEPT`]) missed ticks it drops. Ticks never enumerated (past
/// [`MAX_MISSED_ENUMERATED`], the planner jumps to the present) are not among them.
pub fn plan_keeping_dropped(input: PlanInput<'_>, params: PlanParams, keep: usize) -> Plan {
    let grace_start = params.now - params.misfire_grace;
    let horizon = params.now + params.lookahead;
    let mut plan = Plan {
        runs: Vec::new(),
        missed: 0,
        missed_truncated: false,
        dropped: Vec::new(),
        next_run_at: None,
    };
    let mut dropped = Dropped::new(keep.min(MAX_DROPPED_KEPT));

    // 1. Missed ticks: keep the newest `max_catchup` as candidates, count the rest.
    let (keep, drop_reason) = match input.catchup {
        CatchupPolicy::None => (0, DropReason::CatchupNone),
        CatchupPolicy::FireImmediately | CatchupPolicy::Spread => {
            (params.max_catchup as usize, DropReason::OlderThanMaxCatchup)
        }
    };
    let mut candidates: VecDeque<DateTime<Utc>> = VecDeque::new();
    let mut tick = Some(input.next_run_at);
    let mut enumerated = 0u64;
    while let Some(run_at) = tick.filter(|t| *t < grace_start) {
        enumerated += 1;
        if enumerated > MAX_MISSED_ENUMERATED {
            // Too far behind to pick the newest ticks cheaply: catch up on none of them.
            plan.missed_truncated = true;
            plan.missed += candidates.len() as u64;
            for run_at in candidates.drain(..) {
                dropped.push(run_at, DropReason::TooFarBehind);
            }
            tick = input.timetable.first_at_or_after(grace_start);
            break;
        }
        candidates.push_back(run_at);
        if candidates.len() > keep {
            if let Some(oldest) = candidates.pop_front() {
                dropped.push(oldest, drop_reason);
            }
            plan.missed += 1;
        }
        tick = input.timetable.next_after(run_at);
    }
    plan.dropped = dropped.into_ticks(input.schedule_id);

    // 2. Catch-up runs.
    match input.catchup {
        CatchupPolicy::None => {}
        CatchupPolicy::FireImmediately => {
            let per_pass = params.max_catchup_per_pass as usize;
            if candidates.len() > per_pass {
                // The rest wait for the next pass: next_run_at stays on the first of them.
                let resume_at = candidates[per_pass];
                candidates.truncate(per_pass);
                plan.runs
                    .extend(catchup_runs(&input, &candidates, |_| params.now));
                plan.next_run_at = Some(resume_at);
                return plan;
            }
            plan.runs
                .extend(catchup_runs(&input, &candidates, |_| params.now));
        }
        CatchupPolicy::Spread => {
            let n = candidates.len() as i32;
            let spread = |i: usize| params.now + params.lookahead * i as i32 / n.max(1);
            plan.runs.extend(catchup_runs(&input, &candidates, spread));
        }
    }

    // 3. On-time and late-within-grace ticks up to the horizon.
    while let Some(run_at) = tick.filter(|t| *t <= horizon) {
        let key = RunKey::tick(input.schedule_id, run_at);
        let fire_at = run_at + jitter_offset(&key, input.jitter_ms);
        plan.runs.push(PlannedRun {
            run_at,
            fire_at,
            key,
            catchup: false,
        });
        tick = input.timetable.next_after(run_at);
    }
    plan.next_run_at = tick;
    plan
}

/// The newest dropped ticks, at most `keep` (nothing is kept, nor costs anything, at 0).
struct Dropped {
    keep: usize,
    ticks: VecDeque<(DateTime<Utc>, DropReason)>,
}

impl Dropped {
    fn new(keep: usize) -> Dropped {
        Dropped {
            keep,
            ticks: VecDeque::new(),
        }
    }

    fn push(&mut self, run_at: DateTime<Utc>, reason: DropReason) {
        if self.keep == 0 {
            return;
        }
        if self.ticks.len() == self.keep {
            self.ticks.pop_front();
        }
        self.ticks.push_back((run_at, reason));
    }

    fn into_ticks(self, schedule_id: &str) -> Vec<DroppedTick> {
        self.ticks
            .into_iter()
            .map(|(run_at, reason)| DroppedTick {
                run_at,
                key: RunKey::tick(schedule_id, run_at),
                reason,
            })
            .collect()
    }
}

fn catchup_runs<'a>(
    input: &'a PlanInput<'_>,
    ticks: &'a VecDeque<DateTime<Utc>>,
    fire_at: impl Fn(usize) -> DateTime<Utc> + 'a,
) -> impl Iterator<Item = PlannedRun> + 'a {
    ticks.iter().enumerate().map(move |(i, run_at)| PlannedRun {
        run_at: *run_at,
        fire_at: fire_at(i),
        key: RunKey::tick(input.schedule_id, *run_at),
        catchup: true,
    })
}

impl Plan {
    /// Applies a schedule's `max_runs`: keeps at most `remaining` runs (the limit minus the
    /// runs already created; `None`: no limit) and, once the limit is reached, leaves the
    /// schedule exhausted (`next_run_at` `None`). Missed ticks are not runs and still count
    /// as missed.
    pub fn limit_runs(&mut self, remaining: Option<u64>) {
        let Some(remaining) = remaining else {
            return;
        };
        let keep = usize::try_from(remaining).unwrap_or(usize::MAX);
        if self.runs.len() >= keep {
            self.runs.truncate(keep);
            self.next_run_at = None;
        }
    }
}
