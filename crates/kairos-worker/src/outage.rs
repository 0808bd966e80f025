//! A database outage, logged once: while there is no primary (a failover, a restart), every
//! role's rounds fail each second. The first failure that is an outage
//! ([`kairos_store::Error::is_unavailable`]) is logged at ERROR, naming it; the failures after
//! it are logged at DEBUG only; the first round that succeeds once no role has failed for
//! [`QUIET`] logs how long it lasted (a role still holding a pooled connection to the old
//! primary fails once after another role already got through). The roles' work is left to
//! their next round, which retries it.

use std::error::Error as StdError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long after the last failure of an outage a success ends it.
pub const QUIET: Duration = Duration::from_secs(2);

/// Whether an outage is under way (the fast path of [`answered`]).
static DOWN: AtomicBool = AtomicBool::new(false);
/// When it began and when a role last failed in it.
static SINCE: Mutex<Option<Outage>> = Mutex::new(None);

#[derive(Debug, Clone, Copy, PartialEq)]
struct Outage {
    began: Instant,
    last_failure: Instant,
}

/// Whether `err` (or an error it wraps) says there is no primary to talk to.
pub fn is_outage(err: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(err) = next {
        if let Some(store) = err.downcast_ref::<kairos_store::Error>() {
            return store.is_unavailable();
        }
        next = err.source();
    }
    false
}

/// A failed round of `role`: true when it was part of a database outage, which this call
/// logged (once per outage); false when the caller should log it as its own failure.
pub fn failed(role: &'static str, err: &(dyn StdError + 'static)) -> bool {
    if !is_outage(err) {
        return false;
    }
    let mut since = SINCE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let now = Instant::now();
    if let Some(outage) = since.as_mut() {
        outage.last_failure = now;
        tracing::debug!(role, error = %crate::error_chain(err), "database still unavailable");
    } else {
        *since = Some(Outage {
            began: now,
            last_failure: now,
        });
        DOWN.store(true, Ordering::Release);
        tracing::error!(
            role,
            error = %crate::error_chain(err),
            "database unavailable (no primary behind database.url): every role retries each \
             round; logged once until it answers again"
        );
    }
    true
}

/// A round of `role` succeeded: ends an outage under way once no role has failed for
/// [`QUIET`], logging how long it lasted.
pub fn answered(role: &'static str) {
    if !DOWN.load(Ordering::Acquire) {
        return;
    }
    let mut since = SINCE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(outage) = *since else {
        return;
    };
    if outage.last_failure.elapsed() < QUIET {
        return;
    }
    *since = None;
    DOWN.store(false, Ordering::Release);
    tracing::warn!(
        role,
        outage_ms = outage.began.elapsed().as_millis() as u64,
        "database answers again"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("round failed")]
    struct Wrapped(#[source] kairos_store::Error);

    fn store(err: kairos_testkit::sqlx::Error) -> kairos_store::Error {
        kairos_store::Error::Database(err)
    }

    #[test]
    fn broken_connections_and_timeouts_are_an_outage_wherever_they_are_wrapped() {
        let eof = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "got 0 bytes");
        let lost = Wrapped(store(kairos_testkit::sqlx::Error::Io(eof)));
        assert!(is_outage(&lost));
        let timed_out = Wrapped(store(kairos_testkit::sqlx::Error::PoolTimedOut));
        assert!(is_outage(&timed_out));
        let not_found = Wrapped(store(kairos_testkit::sqlx::Error::RowNotFound));
        assert!(!is_outage(&not_found));
        assert!(!is_outage(&std::fmt::Error));
    }

    #[test]
    fn an_outage_is_reported_once_and_ended_once() {
        let lost = || Wrapped(store(kairos_testkit::sqlx::Error::PoolTimedOut));
        assert!(failed("planner", &lost()));
        assert!(DOWN.load(Ordering::Acquire));
        let began = SINCE.lock().expect("lock").map(|o| o.began);
        assert!(failed("dispatcher", &lost()));
        assert_eq!(
            SINCE.lock().expect("lock").map(|o| o.began),
            began,
            "one outage, begun once"
        );
        answered("planner");
        assert!(
            DOWN.load(Ordering::Acquire),
            "a failure just now: not over yet"
        );
        if let Some(outage) = SINCE.lock().expect("lock").as_mut() {
            outage.last_failure -= QUIET;
        }
        answered("sweeper");
        assert!(!DOWN.load(Ordering::Acquire));
        assert!(SINCE.lock().expect("lock").is_none());
        let other = Wrapped(store(kairos_testkit::sqlx::Error::RowNotFound));
        assert!(!failed("planner", &other), "the caller logs other failures");
        assert!(!DOWN.load(Ordering::Acquire));
    }
}
