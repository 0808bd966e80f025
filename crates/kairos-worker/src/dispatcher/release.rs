//! When a round's runs go out: each wave once its `fire_at` has come on the database's clock,
//! or all at once (a run-launcher start). A leaf the round's steps share.

use chrono::{DateTime, Utc};
use kairos_store::dispatch::Claimed;

use super::clock::DbClock;

/// When a round's runs go out.
#[derive(Debug, Clone, Copy)]
pub(super) enum Release {
    /// Each once its `fire_at` has come on the database's clock (pre-staged runs wait).
    WhenDue(DbClock),
    /// All at once (a run-launcher start), at the database time given.
    Now(DateTime<Utc>),
}

impl Release {
    /// The database's time now (at the latest).
    pub(super) fn now(&self) -> DateTime<Utc> {
        match self {
            Release::WhenDue(clock) => clock.now(),
            Release::Now(now) => *now,
        }
    }

    /// The clock to date a wave's acknowledgements by (`launch.rs` reads it once they are
    /// all in: so each run's fire drift is its own acknowledgement, not the end of its
    /// wave). `None` for a run-launcher start, whose `now` was read before publishing.
    pub(super) fn clock(&self) -> Option<&DbClock> {
        match self {
            Release::WhenDue(clock) => Some(clock),
            Release::Now(_) => None,
        }
    }

    /// Takes the next wave out of `waiting` (claim order kept): after waiting for the
    /// earliest `fire_at`, every run due by then. `None` when nothing is left.
    pub(super) async fn next_wave(&self, waiting: &mut Vec<Claimed>) -> Option<Vec<Claimed>> {
        let earliest = waiting.iter().map(|run| run.fire_at).min()?;
        let Release::WhenDue(clock) = self else {
            return Some(std::mem::take(waiting));
        };
        clock.sleep_until(earliest).await;
        let now = clock.now();
        let (wave, later): (Vec<Claimed>, Vec<Claimed>) =
            waiting.drain(..).partition(|run| run.fire_at <= now);
        *waiting = later;
        Some(wave)
    }
}
