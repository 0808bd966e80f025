//! A database outage, logged once: while there is no primary (a failover, a restart), every
//! role's rounds fail each second. The first failure that is an outage
//! ([`kairos_store::Error::is_unavailable`]) is logged at ERROR, naming it; the failures after
//! it are logged at DEBUG only; the first round that succeeds once no role has failed for
//! [`QUIET`] logs how long it lasted. A role still holding a pooled connection to the old
//! primary, or waiting on a pool a busy recovery drained, may fail once more after that: a
//! failure within [`AFTERMATH`] of the end is the same outage relapsing, logged at DEBUG,
//! and its end too, unless it goes on past [`AFTERMATH`] (then it is a new outage, logged as
//! one). The roles' work is left to their next round, which retries it.

use std::error::Error as StdError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long after the last failure of an outage a success ends it.
pub const QUIET: Duration = Duration::from_secs(2);
/// How long after an outage ended a failure still counts as part of it.
pub const AFTERMATH: Duration = Duration::from_secs(15);

/// Whether an outage is under way (the fast path of [`answered`]).
static DOWN: AtomicBool = AtomicBool::new(false);
/// The outage under way, or when the last one ended.
static STATE: Mutex<State> = Mutex::new(State::Up { ended: None });

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// No outage; `ended`: when the last one ended.
    Up { ended: Option<Instant> },
    /// An outage under way.
    Down(Outage),
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Outage {
    began: Instant,
    last_failure: Instant,
    /// A relapse of an outage already logged as ended: logged at DEBUG unless it lasts.
    relapse: bool,
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

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn log_down(role: &'static str, err: &(dyn StdError + 'static)) {
    tracing::error!(
        role,
        error = %crate::error_chain(err),
        "database unavailable (no primary behind database.url): every role retries each \
         round; logged once until it answers again"
    );
}

/// A failed round of `role`: true when it was part of a database outage, which this call
/// logged (once per outage); false when the caller should log it as its own failure.
pub fn failed(role: &'static str, err: &(dyn StdError + 'static)) -> bool {
    if !is_outage(err) {
        return false;
    }
    let mut state = state();
    let now = Instant::now();
    match *state {
        State::Down(ref mut outage) => {
            outage.last_failure = now;
            if outage.relapse && now.duration_since(outage.began) >= AFTERMATH {
                // Not a relapse: a new outage, and it goes on.
                outage.relapse = false;
                log_down(role, err);
            } else {
                tracing::debug!(role, error = %crate::error_chain(err),
                    "database still unavailable");
            }
        }
        State::Up { ended } => {
            let relapse = ended.is_some_and(|at| now.duration_since(at) < AFTERMATH);
            *state = State::Down(Outage {
                began: now,
                last_failure: now,
                relapse,
            });
            DOWN.store(true, Ordering::Release);
            if relapse {
                tracing::debug!(role, error = %crate::error_chain(err),
                    "database failed again right after the outage ended (a connection from \
                     before it, or a pool still drained); the same outage");
            } else {
                log_down(role, err);
            }
        }
    }
    true
}

/// A round of `role` succeeded: ends an outage under way once no role has failed for
/// [`QUIET`], logging how long it lasted.
pub fn answered(role: &'static str) {
    if !DOWN.load(Ordering::Acquire) {
        return;
    }
    let mut state = state();
    let State::Down(outage) = *state else {
        return;
    };
    if outage.last_failure.elapsed() < QUIET {
        return;
    }
    *state = State::Up {
        ended: Some(Instant::now()),
    };
    DOWN.store(false, Ordering::Release);
    let outage_ms = outage.began.elapsed().as_millis() as u64;
    if outage.relapse {
        tracing::debug!(role, outage_ms, "relapse over; the primary answers");
    } else {
        tracing::warn!(role, outage_ms, "database answers again");
    }
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

    fn down() -> Option<Outage> {
        match *state() {
            State::Down(outage) => Some(outage),
            State::Up { .. } => None,
        }
    }

    fn age_last_failure(by: Duration) {
        if let State::Down(outage) = &mut *state() {
            outage.last_failure -= by;
        }
    }

    #[test]
    fn an_outage_is_reported_once_and_ended_once() {
        let lost = || Wrapped(store(kairos_testkit::sqlx::Error::PoolTimedOut));
        assert!(failed("planner", &lost()));
        assert!(DOWN.load(Ordering::Acquire));
        let began = down().map(|o| o.began);
        assert!(failed("dispatcher", &lost()));
        assert_eq!(down().map(|o| o.began), began, "one outage, begun once");
        answered("planner");
        assert!(
            DOWN.load(Ordering::Acquire),
            "a failure just now: not over yet"
        );
        age_last_failure(QUIET);
        answered("sweeper");
        assert!(!DOWN.load(Ordering::Acquire));
        assert!(down().is_none());

        // A failure right after the end: the same outage relapsing, not a new one.
        assert!(failed("dispatcher", &lost()));
        assert_eq!(down().map(|o| o.relapse), Some(true));
        age_last_failure(QUIET);
        answered("dispatcher");
        assert!(down().is_none());
        // A relapse that goes on past the aftermath is a new outage.
        assert!(failed("dispatcher", &lost()));
        if let State::Down(outage) = &mut *state() {
            outage.began -= AFTERMATH;
        }
        assert!(failed("planner", &lost()));
        assert_eq!(down().map(|o| o.relapse), Some(false));
        age_last_failure(QUIET);
        answered("planner");
        // Long after an end, a failure is a new outage.
        *state() = State::Up {
            ended: Instant::now().checked_sub(AFTERMATH),
        };
        assert!(failed("planner", &lost()));
        assert_eq!(down().map(|o| o.relapse), Some(false));
        age_last_failure(QUIET);
        answered("planner");
        let other = Wrapped(store(kairos_testkit::sqlx::Error::RowNotFound));
        assert!(!failed("planner", &other), "the caller logs other failures");
        assert!(!DOWN.load(Ordering::Acquire));
    }
}
