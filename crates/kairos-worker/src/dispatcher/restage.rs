//! Before a wave is decided: its `PENDING` runs whose schedule was written while this round
//! held them (the write skipped them, `kairos_store::runs::future_planned`) are brought in
//! line with the schedule as it is now (`kairos_registrar::restage`). A cancelled one leaves
//! the round; a kept one goes out, launching what its schedule launches now, with this
//! wave, or with a later one if its new `fire_at` (another jitter) is still to come.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use kairos_core::RunStatus;
use kairos_store::dispatch::{self, Claimed, RunSpan, WriteSnapshot};
use kairos_store::Tx;

use super::decide_ahead::DecidedAhead;
use super::stage::Staged;
use super::Result;

/// The wave to decide now, after the runs left behind by a schedule write are restaged;
/// kept runs due later go back to `waiting`. Only the schedules written since the claim
/// (`seen`), or already past a run's revision when it was claimed, are read again: at a
/// burst's tick that is one scan of a table of recent writes, not a read of every schedule
/// of the wave. What the round read `ahead` of those schedules is forgotten, and what it
/// recorded ahead for them taken back. Returns the wave and how many runs were withdrawn
/// (cancelled).
pub(super) async fn restage(
    tx: &mut Tx,
    wave: Vec<Claimed>,
    waiting: &mut Vec<Claimed>,
    seen: &WriteSnapshot,
    now: DateTime<Utc>,
    (ahead, staged, span): (&mut DecidedAhead, &mut Staged, RunSpan),
) -> Result<(Vec<Claimed>, usize)> {
    let written = dispatch::written_since(&mut **tx, seen).await?;
    ahead.forget(&written);
    staged.take_back_written(tx, &written, span).await?;
    let suspect = |run: &Claimed| {
        run.status == RunStatus::Pending
            && (written.contains(&run.schedule_id) || run.stale_at_claim())
    };
    let ids: HashSet<&str> = wave
        .iter()
        .filter(|run| suspect(run))
        .map(|run| run.schedule_id.as_str())
        .collect();
    if ids.is_empty() {
        return Ok((wave, 0));
    }
    let ids: Vec<String> = ids.into_iter().map(str::to_string).collect();
    let current = dispatch::schedule_revisions(&mut **tx, &ids).await?;
    let revision = |run: &Claimed| current.get(&run.schedule_id).copied();
    let (behind, mut live): (Vec<Claimed>, Vec<Claimed>) = wave
        .into_iter()
        .partition(|run| suspect(run) && run.left_behind(revision(run)));
    if behind.is_empty() {
        return Ok((live, 0));
    }
    let kept = kairos_registrar::restage(tx, &behind, now).await?;
    let mut withdrawn = 0;
    for mut run in behind {
        let Some(current) = kept.get(&run.idempotency_key) else {
            tracing::info!(
                key = %run.idempotency_key,
                trace_id = %crate::trace_of(&run.idempotency_key),
                schedule_id = %run.schedule_id,
                "run withdrawn: its schedule changed while it was staged",
            );
            withdrawn += 1;
            continue;
        };
        run.fire_at = current.fire_at;
        run.workflow_id.clone_from(&current.workflow_id);
        run.version = current.version;
        run.user_id.clone_from(&current.user_id);
        run.revision = revision(&run);
        run.schedule_revision = run.revision;
        if run.fire_at <= now {
            live.push(run);
        } else {
            waiting.push(run);
        }
    }
    Ok((live, withdrawn))
}
