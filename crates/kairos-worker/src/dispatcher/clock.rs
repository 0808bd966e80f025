//! The database's clock as an instance can follow it between statements: the offset
//! between the two clocks is measured when a round claims its batch, and a pre-staged run
//! waits on the instance clock plus that offset. The offset is measured so that the estimate
//! can only lag the database (invariant "the database clock decides": an instance whose
//! clock is fast never publishes early; it may publish as late as the claim statement took).

use std::time::Instant;

use chrono::{DateTime, TimeDelta, Utc};

/// Reads the instance's clock (`Utc::now` in production; tests pass a skewed one).
pub type InstanceClock = fn() -> DateTime<Utc>;

/// The database's clock, estimated from the instance's.
#[derive(Debug, Clone, Copy)]
pub(super) struct DbClock {
    instance: InstanceClock,
    offset: TimeDelta,
}

impl DbClock {
    /// `db_now` was read by a statement that ended before `instance()` is read here, so
    /// `instance() + offset` is never ahead of the database's clock.
    pub(super) fn measured(instance: InstanceClock, db_now: DateTime<Utc>) -> DbClock {
        DbClock {
            instance,
            offset: db_now - instance(),
        }
    }

    /// The database's time now, at the latest.
    pub(super) fn now(&self) -> DateTime<Utc> {
        (self.instance)() + self.offset
    }

    /// The database's time now, paired with the instance's monotonic clock, to date the
    /// moments before it (acknowledgements) consistently with one another.
    pub(super) fn stamp(&self) -> Stamp {
        Stamp {
            db_now: self.now(),
            instant: Instant::now(),
        }
    }

    /// Sleeps until the database's clock has reached `at`.
    pub(super) async fn sleep_until(&self, at: DateTime<Utc>) {
        loop {
            let left = at - self.now();
            let Ok(left) = left.to_std() else { return };
            if left.is_zero() {
                return;
            }
            tokio::time::sleep(left).await;
        }
    }
}

/// A reading of the database's clock and of the instance's monotonic clock at one moment.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stamp {
    db_now: DateTime<Utc>,
    instant: Instant,
}

impl Stamp {
    /// The database's time when the monotonic clock read `instant`, at the latest: every
    /// moment dated from one stamp keeps its order and distance to the others.
    pub(super) fn at(&self, instant: Instant) -> DateTime<Utc> {
        let before = self.instant.saturating_duration_since(instant);
        self.db_now - TimeDelta::from_std(before).unwrap_or(TimeDelta::zero())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fast() -> DateTime<Utc> {
        Utc::now() + TimeDelta::minutes(5)
    }

    #[test]
    fn a_fast_instance_clock_is_corrected_to_the_database() {
        let db_now = Utc::now();
        let clock = DbClock::measured(fast, db_now);
        let estimate = clock.now();
        assert!(estimate >= db_now, "time moves forward");
        assert!(
            estimate <= Utc::now(),
            "never ahead of the database's clock"
        );
    }

    #[test]
    fn moments_dated_from_one_stamp_keep_their_order_and_distance() {
        let first = Instant::now();
        let second = first + std::time::Duration::from_millis(7);
        let clock = DbClock::measured(fast, Utc::now());
        let stamp = Stamp {
            db_now: clock.now(),
            instant: second + std::time::Duration::from_millis(3),
        };
        assert_eq!(
            stamp.at(second) - stamp.at(first),
            TimeDelta::milliseconds(7)
        );
        assert_eq!(stamp.db_now - stamp.at(second), TimeDelta::milliseconds(3));
        assert!(stamp.at(first) <= Utc::now(), "never ahead of the database");
    }

    #[tokio::test]
    async fn sleep_until_waits_for_the_database_time() {
        let clock = DbClock::measured(fast, Utc::now());
        let at = Utc::now() + TimeDelta::milliseconds(50);
        clock.sleep_until(at).await;
        assert!(Utc::now() >= at);
    }
}
