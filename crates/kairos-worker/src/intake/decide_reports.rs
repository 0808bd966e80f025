//! A batch of status reports decided in order against the runs the batch locked: each
//! report through `kairos_core::judge`, its effect applied to the run in memory (so the
//! next report about the same run sees it), and what the batch must write collected in
//! [`Writes`]. No IO: the applier locks before and writes after.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use kairos_core::{
    judge, moved_to, AfterFailure, Attempt, ReportFacts, Reported, Run, RunFacts, RunStatus,
    Verdict,
};
use kairos_store::status::{
    Applied, Changed, FinishedAttempt, Holders, Locked, LockedRun, ReportedLog, StatusReport,
    Writes,
};

/// One report of a batch: the run's key and what was reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The run.
    pub key: String,
    /// The report.
    pub report: StatusReport,
}

/// What became of one item. (Answers live in one vector per batch and are moved out once:
/// boxing the large variant would cost an allocation per report for nothing.)
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Decided (applied, ignored or refused).
    Decided(Applied),
    /// Another transaction holds the run (this one, when it could be told): try again in a
    /// later batch.
    Busy(Option<i64>),
}

/// The batch decided: one answer per item, in order, and what to write.
#[derive(Debug, Default)]
pub(crate) struct Folded {
    pub(crate) answers: Vec<Answer>,
    pub(crate) writes: Writes,
}

/// Decides `items` in order against `locked`.
pub(crate) fn decide_reports(locked: &mut Locked, items: &[Item]) -> Folded {
    let now = locked.now;
    let busy: HashSet<&str> = locked.busy.iter().map(String::as_str).collect();
    let mut changed: HashSet<String> = HashSet::new();
    let mut order: Vec<String> = Vec::new();
    let mut folded = Folded::default();
    for item in items {
        if busy.contains(item.key.as_str()) {
            folded
                .answers
                .push(Answer::Busy(locked.holding.get(&item.key).copied()));
            continue;
        }
        let Some(entry) = locked.runs.get_mut(&item.key) else {
            folded.answers.push(Answer::Decided(Applied::NotFound));
            continue;
        };
        let attempt = entry.run.attempt;
        let outcome = decide(
            entry,
            &item.report,
            &mut locked.holders,
            now,
            &mut folded.writes,
        );
        if outcome.takes_logs {
            take_logs(&mut folded.writes.logs, &item.key, attempt, &item.report);
        }
        if outcome.changed && changed.insert(item.key.clone()) {
            order.push(item.key.clone());
        }
        folded.answers.push(Answer::Decided(outcome.applied));
    }
    for key in order {
        let entry = &locked.runs[&key];
        folded.writes.changed.push(Changed {
            run: entry.run.clone(),
            exclusive: entry.exclusive,
        });
    }
    folded
}

struct Outcome {
    applied: Applied,
    /// The row changed.
    changed: bool,
    /// The report's logs belong to the attempt: it is the one in progress (or the one the
    /// report ended), and the report is from its owner (or nobody owns it yet).
    takes_logs: bool,
}

/// Adds what `report` said of the logs of `key`'s `attempt` to `logs`, merged with an
/// earlier report of the batch about the same attempt (a field the later one has wins).
fn take_logs(logs: &mut Vec<ReportedLog>, key: &str, attempt: i32, report: &StatusReport) {
    if report.log_url.is_none() && report.output.is_none() {
        return;
    }
    let same = logs
        .iter_mut()
        .rev()
        .find(|log| log.attempt == attempt && log.idempotency_key == key);
    match same {
        Some(log) => {
            if report.log_url.is_some() {
                log.log_url.clone_from(&report.log_url);
            }
            if report.output.is_some() {
                log.output.clone_from(&report.output);
            }
        }
        None => logs.push(ReportedLog {
            idempotency_key: key.to_string(),
            attempt,
            log_url: report.log_url.clone(),
            output: report.output.clone(),
        }),
    }
}

/// One report against one run: the verdict, and when it applies, its effect on the run, on
/// the schedule's holder, and on what the batch writes.
fn decide(
    entry: &mut LockedRun,
    report: &StatusReport,
    holders: &mut HashMap<String, Holders>,
    now: DateTime<Utc>,
    writes: &mut Writes,
) -> Outcome {
    let run = &entry.run;
    let holder = holders
        .get(&run.schedule_id)
        .and_then(|held| held.blocking(&run.idempotency_key))
        .map(str::to_string);
    let facts = RunFacts {
        status: run.status,
        attempt: u32::try_from(run.attempt).unwrap_or(1),
        fire_at: run.fire_at,
        published: run.published_at.is_some(),
        executor_id: run.executor_id.as_deref(),
        schedule_held_by_another: entry.exclusive_now && holder.is_some(),
    };
    let reported = ReportFacts {
        reported: report.status,
        attempt: report.attempt,
        executor_id: report.executor_id.as_deref(),
    };
    let unchanged = |applied| Outcome {
        applied,
        changed: false,
        takes_logs: false,
    };
    let from_owner = match (report.executor_id.as_deref(), run.executor_id.as_deref()) {
        (Some(reporter), Some(owner)) => reporter == owner,
        _ => true,
    };
    match judge(&facts, &reported, now) {
        Verdict::Noop => Outcome {
            takes_logs: from_owner,
            ..unchanged(Applied::Unchanged(run.clone()))
        },
        Verdict::Stale => unchanged(Applied::Unchanged(run.clone())),
        Verdict::Unpublished => unchanged(Applied::Unpublished(run.clone())),
        Verdict::Conflict => unchanged(Applied::Conflict {
            owner: run.executor_id.clone().unwrap_or_default(),
            run: run.clone(),
        }),
        Verdict::Blocked => unchanged(Applied::Blocked {
            run: run.clone(),
            in_flight: holder.unwrap_or_default(),
        }),
        Verdict::Heartbeat => {
            let run = &mut entry.run;
            run.heartbeat_at = Some(now);
            run.executor_id = run
                .executor_id
                .take()
                .or_else(|| report.executor_id.clone());
            run.updated_at = now;
            Outcome {
                applied: Applied::Moved(run.clone()),
                changed: true,
                takes_logs: from_owner,
            }
        }
        Verdict::Apply => {
            let after_failure = after_failure(entry, report, now);
            let was_pending = entry.run.status == RunStatus::Pending;
            if let Some(attempt) = finished_attempt(&entry.run, report, now) {
                writes.attempts.push(attempt);
            }
            let before = entry.run.status;
            apply(&mut entry.run, report, after_failure, now);
            if was_pending {
                entry.exclusive = entry.exclusive_now;
            }
            let run = &entry.run;
            if entry.exclusive && before.holds_schedule() && !run.status.holds_schedule() {
                if let Some(held) = holders.get_mut(&run.schedule_id) {
                    held.leave(&run.idempotency_key);
                }
            }
            if entry.exclusive && run.status.holds_schedule() {
                holders
                    .entry(run.schedule_id.clone())
                    .or_insert_with(|| Holders {
                        keys: Vec::new(),
                        limit: 1,
                    })
                    .enter(&run.idempotency_key);
            }
            let ended = matches!(
                run.status,
                RunStatus::Success | RunStatus::Failed | RunStatus::Cancelled
            );
            if entry.exclusive && ended {
                writes.release.push(run.schedule_id.clone());
            }
            Outcome {
                applied: Applied::Moved(run.clone()),
                changed: true,
                takes_logs: from_owner,
            }
        }
    }
}

/// For a `FAILED` report: the next attempt, a dead letter, or (a run being cancelled)
/// nothing more.
fn after_failure(entry: &LockedRun, report: &StatusReport, now: DateTime<Utc>) -> AfterFailure {
    let run = &entry.run;
    if report.status != Reported::Failed || run.status == RunStatus::Cancelling {
        return AfterFailure::Nothing;
    }
    if report.retryable == Some(false) {
        return AfterFailure::DeadLetter;
    }
    match entry
        .failure
        .retry_policy()
        .next_attempt_at(run.attempt, &run.idempotency_key, now)
    {
        Some(at) => AfterFailure::Retry(at),
        None => AfterFailure::DeadLetter,
    }
}

/// The attempt a final `SUCCESS` or `FAILED` report ends, as `run_attempts` keeps it.
fn finished_attempt(
    run: &Run,
    report: &StatusReport,
    now: DateTime<Utc>,
) -> Option<FinishedAttempt> {
    let status = match report.status {
        Reported::Success => RunStatus::Success,
        Reported::Failed => RunStatus::Failed,
        _ => return None,
    };
    Some(FinishedAttempt {
        idempotency_key: run.idempotency_key.clone(),
        attempt: Attempt {
            attempt: run.attempt,
            status,
            error: (status == RunStatus::Failed)
                .then(|| report.error.clone())
                .flatten(),
            executor_id: run
                .executor_id
                .clone()
                .or_else(|| report.executor_id.clone()),
            run_id: report.run_id.clone().or_else(|| run.run_id.clone()),
            published_at: run.published_at,
            started_at: run.started_at,
            finished_at: now,
        },
    })
}

/// The columns a report that applies changes (docs/run_state_machine.md): the new status,
/// its times, the owner, and for a failure with attempts left the next attempt (a new,
/// unpublished attempt: its publish, start and owner are cleared).
fn apply(run: &mut Run, report: &StatusReport, after_failure: AfterFailure, now: DateTime<Utc>) {
    let reported = report.status;
    let was = run.status;
    let retry_at = match after_failure {
        AfterFailure::Retry(at) if reported == Reported::Failed => Some(at),
        _ => None,
    };
    run.reason = reason(run, reported, was, retry_at);
    if let Some(status) = moved_to(reported, after_failure) {
        run.status = status;
    }
    if reported == Reported::Failed {
        run.last_error = report.error.clone().or(run.last_error.take());
    }
    if reported == Reported::Failed && after_failure == AfterFailure::DeadLetter {
        run.dead_lettered_at = Some(now);
    }
    run.updated_at = now;
    if let Some(at) = retry_at {
        run.attempt += 1;
        run.fire_at = at;
        run.started_at = None;
        run.finished_at = None;
        run.executor_id = None;
        run.run_id = None;
        run.published_at = None;
        run.stream_seq = None;
        run.heartbeat_at = None;
        return;
    }
    if reported == Reported::Started {
        run.started_at = Some(now);
    } else {
        run.finished_at = Some(now);
    }
    run.executor_id = run
        .executor_id
        .take()
        .or_else(|| report.executor_id.clone());
    run.run_id = report.run_id.clone().or(run.run_id.take());
    // A due PENDING run reported on was published by a dispatcher that died before it
    // recorded the publish: record it now, or its next report would be refused.
    if was == RunStatus::Pending {
        run.published_at = run.published_at.or(Some(now));
    }
}

/// The run's `reason` after the report.
fn reason(
    run: &Run,
    reported: Reported,
    was: RunStatus,
    retry_at: Option<DateTime<Utc>>,
) -> Option<String> {
    match (reported, was, retry_at) {
        (Reported::Success | Reported::Failed, RunStatus::Cancelling, _) => Some(format!(
            "executor reported {reported} before it stopped the run ({})",
            run.reason.as_deref().unwrap_or("cancel requested")
        )),
        (Reported::Failed, _, Some(at)) => Some(format!(
            "attempt {} failed; attempt {} at {}",
            run.attempt,
            run.attempt + 1,
            at.format("%Y-%m-%dT%H:%M:%SZ")
        )),
        (Reported::Failed, _, None) => Some("executor reported FAILED".into()),
        (Reported::Cancelled, was, _) if was != RunStatus::Cancelling => {
            Some("cancelled by the executor".into())
        }
        _ => run.reason.clone(),
    }
}
