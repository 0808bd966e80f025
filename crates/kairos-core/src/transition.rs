//! What an executor's report does to a run (docs/run_state_machine.md, "Forward only",
//! "Only published runs take reports", "Ownership"): one pure decision, [`judge`], and its
//! effect, [`Verdict`]. The store applies the effect to the row; the intake folds a batch of
//! reports through this one function, in order, so several reports about one run in one
//! batch apply exactly as they would one after another.

use chrono::{DateTime, Utc};

use crate::{Reported, RunStatus};

/// The rank a report must raise for it to apply: `PENDING` 0 < `ENQUEUED` 1 < `STARTED` 2 <
/// `CANCELLING` 3 < every other status 4 (final, or not moved by reports at all).
pub fn rank(status: RunStatus) -> u8 {
    match status {
        RunStatus::Pending => 0,
        RunStatus::Enqueued => 1,
        RunStatus::Started => 2,
        RunStatus::Cancelling => 3,
        RunStatus::Queued
        | RunStatus::Success
        | RunStatus::Failed
        | RunStatus::TimedOut
        | RunStatus::Skipped
        | RunStatus::Cancelled
        | RunStatus::Retrying => 4,
    }
}

/// The rank a report moves a run to (a heartbeat moves nothing).
fn reported_rank(reported: Reported) -> Option<u8> {
    match reported {
        Reported::Heartbeat => None,
        Reported::Started => Some(2),
        Reported::Success | Reported::Failed | Reported::Cancelled => Some(4),
    }
}

/// The facts about a run that decide what a report does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunFacts<'a> {
    /// Its status now.
    pub status: RunStatus,
    /// The attempt in progress.
    pub attempt: u32,
    /// When it fires (a `PENDING` run not yet due cannot have been published).
    pub fire_at: DateTime<Utc>,
    /// Whether its current attempt was recorded as published.
    pub published: bool,
    /// The executor that owns it, once one reported.
    pub executor_id: Option<&'a str>,
    /// For a `PENDING` run: becoming in flight would hold its schedule (exclusive schedule,
    /// not a `run-launcher/start` run), and another run holds the schedule now.
    pub schedule_held_by_another: bool,
}

/// The facts of a report that decide what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportFacts<'a> {
    /// What was reported.
    pub reported: Reported,
    /// The attempt it is about (`None`: the one in progress).
    pub attempt: Option<u32>,
    /// The reporting executor.
    pub executor_id: Option<&'a str>,
}

/// What a report does to a run. Every verdict but [`Verdict::Apply`] and
/// [`Verdict::Heartbeat`] changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// About another attempt than the one in progress: ignored.
    Stale,
    /// The run was never published (or its current attempt is not out yet), so no executor
    /// can be running it: refused.
    Unpublished,
    /// Another executor owns the run: refused.
    Conflict,
    /// A due `PENDING` run whose schedule another run holds: it cannot be in flight too.
    Blocked,
    /// A sign of life on a published, unfinished run.
    Heartbeat,
    /// The report raises the run's rank: the run moves to the reported status.
    Apply,
    /// Repeated or out of order (`STARTED` after `SUCCESS`): nothing changes.
    Noop,
}

/// Decides what `report` does to `run` at `now` (the database's clock). The rules, in the
/// order they are tried: another attempt → stale; not published → refused; another
/// executor's unfinished run → conflict; a blocked due `PENDING` run → blocked; a heartbeat
/// on a published unfinished run → heartbeat; a higher rank → apply; else a no-op.
pub fn judge(run: &RunFacts<'_>, report: &ReportFacts<'_>, now: DateTime<Utc>) -> Verdict {
    if report.attempt.is_some_and(|attempt| attempt != run.attempt) {
        return Verdict::Stale;
    }
    let pending = run.status == RunStatus::Pending;
    if (pending && run.fire_at > now) || (!pending && !run.published) {
        return Verdict::Unpublished;
    }
    let owned_by_another = matches!(
        (report.executor_id, run.executor_id),
        (Some(reporter), Some(owner)) if reporter != owner
    );
    let asserts_ownership = matches!(report.reported, Reported::Started | Reported::Heartbeat);
    if owned_by_another && (asserts_ownership || rank(run.status) < 4) {
        return Verdict::Conflict;
    }
    if pending && run.schedule_held_by_another {
        return Verdict::Blocked;
    }
    match reported_rank(report.reported) {
        None if run.status.in_flight() => Verdict::Heartbeat,
        None => Verdict::Noop,
        Some(to) if rank(run.status) < to => Verdict::Apply,
        Some(_) => Verdict::Noop,
    }
}

/// What follows a `FAILED` report that applies, decided from the schedule's retry policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// The next attempt at this time: the run becomes `RETRYING`.
    Retry(DateTime<Utc>),
    /// No attempt follows: the run is `FAILED` and dead-lettered.
    DeadLetter,
    /// Recorded as `FAILED` and nothing else (a run that was being cancelled is never
    /// retried, and is no dead letter).
    Nothing,
}

/// The status a run takes when `reported` applies, given what follows a failure.
pub fn moved_to(reported: Reported, after_failure: AfterFailure) -> Option<RunStatus> {
    match (reported, after_failure) {
        (Reported::Failed, AfterFailure::Retry(_)) => Some(RunStatus::Retrying),
        (reported, _) => reported.status(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(seconds, 0).expect("valid")
    }

    fn run(status: RunStatus) -> RunFacts<'static> {
        RunFacts {
            status,
            attempt: 1,
            fire_at: at(100),
            published: status != RunStatus::Pending,
            executor_id: None,
            schedule_held_by_another: false,
        }
    }

    fn report(reported: Reported) -> ReportFacts<'static> {
        ReportFacts {
            reported,
            attempt: None,
            executor_id: None,
        }
    }

    #[test]
    fn reports_only_move_forward() {
        use Reported as R;
        use RunStatus as S;
        let now = at(200);
        let cases = [
            (S::Enqueued, R::Started, Verdict::Apply),
            (S::Enqueued, R::Success, Verdict::Apply),
            (S::Started, R::Started, Verdict::Noop),
            (S::Started, R::Failed, Verdict::Apply),
            (S::Success, R::Started, Verdict::Noop),
            (S::Success, R::Failed, Verdict::Noop),
            (S::Cancelling, R::Started, Verdict::Noop),
            (S::Cancelling, R::Success, Verdict::Apply),
            (S::Cancelling, R::Cancelled, Verdict::Apply),
            (S::Started, R::Heartbeat, Verdict::Heartbeat),
            (S::Cancelling, R::Heartbeat, Verdict::Heartbeat),
            (S::Success, R::Heartbeat, Verdict::Noop),
            (S::TimedOut, R::Success, Verdict::Noop),
        ];
        for (status, reported, verdict) in cases {
            assert_eq!(
                judge(&run(status), &report(reported), now),
                verdict,
                "{status} + {reported}"
            );
        }
    }

    #[test]
    fn unpublished_runs_take_no_report() {
        let now = at(200);
        for status in [
            RunStatus::Queued,
            RunStatus::Skipped,
            RunStatus::Retrying,
            RunStatus::Cancelled,
        ] {
            let mut facts = run(status);
            facts.published = false;
            let verdict = judge(&facts, &report(Reported::Started), now);
            assert_eq!(verdict, Verdict::Unpublished, "{status}");
        }
        let mut future = run(RunStatus::Pending);
        future.fire_at = at(300);
        assert_eq!(
            judge(&future, &report(Reported::Started), now),
            Verdict::Unpublished
        );
        // A due PENDING run was published by a dispatcher that died before recording it.
        assert_eq!(
            judge(&run(RunStatus::Pending), &report(Reported::Started), now),
            Verdict::Apply
        );
        let mut blocked = run(RunStatus::Pending);
        blocked.schedule_held_by_another = true;
        assert_eq!(
            judge(&blocked, &report(Reported::Started), now),
            Verdict::Blocked
        );
    }

    #[test]
    fn the_first_executor_owns_the_run() {
        let now = at(200);
        let mut owned = run(RunStatus::Started);
        owned.executor_id = Some("e1");
        let mut other = report(Reported::Success);
        other.executor_id = Some("e2");
        assert_eq!(judge(&owned, &other, now), Verdict::Conflict);
        other.executor_id = Some("e1");
        assert_eq!(judge(&owned, &other, now), Verdict::Apply);
        // A finished run answers another executor's final report as a no-op, its STARTED
        // as a conflict.
        owned.status = RunStatus::Success;
        other.executor_id = Some("e2");
        assert_eq!(judge(&owned, &other, now), Verdict::Noop);
        other.reported = Reported::Started;
        assert_eq!(judge(&owned, &other, now), Verdict::Conflict);
    }

    #[test]
    fn a_report_about_another_attempt_is_stale() {
        let mut facts = run(RunStatus::Started);
        facts.attempt = 3;
        let mut late = report(Reported::Failed);
        late.attempt = Some(2);
        assert_eq!(judge(&facts, &late, at(200)), Verdict::Stale);
        late.attempt = Some(3);
        assert_eq!(judge(&facts, &late, at(200)), Verdict::Apply);
    }

    #[test]
    fn a_failure_with_attempts_left_retries() {
        let retry = AfterFailure::Retry(at(500));
        assert_eq!(moved_to(Reported::Failed, retry), Some(RunStatus::Retrying));
        assert_eq!(
            moved_to(Reported::Failed, AfterFailure::DeadLetter),
            Some(RunStatus::Failed)
        );
        assert_eq!(moved_to(Reported::Success, retry), Some(RunStatus::Success));
        assert_eq!(moved_to(Reported::Heartbeat, retry), None);
    }
}
