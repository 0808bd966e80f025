//! Where the claimer's next claim may start. A claim that came back short took every run due
//! by its `due_by` that no other round held, so the next claim the claimer's own pace asks
//! for needs only the runs due after it (`ClaimScope::after`): it starts the claim index
//! there instead of walking past every run the pre-staged rounds of all instances hold and
//! every launched run whose index entry waits for vacuum.
//!
//! A run can still become due behind that point without passing through a claim: a retry or
//! a release from `QUEUED` (both wake the dispatchers, and a claim after a wake-up starts
//! from the oldest due run), a round elsewhere that rolled back (its own claimer claims
//! from the oldest due run after it), a region whose stream became ready again. So a claim
//! starts from the oldest due run at least every `every`, whatever the pace.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

/// The claimer's floor: the `due_by` of its last claim when that came back short.
#[derive(Debug)]
pub(super) struct ClaimFloor {
    after: Option<DateTime<Utc>>,
    whole_at: Instant,
    every: Duration,
}

impl ClaimFloor {
    /// No floor yet; a claim from the oldest due run at least every `every`.
    pub(super) fn new(every: Duration) -> ClaimFloor {
        ClaimFloor {
            after: None,
            whole_at: Instant::now(),
            every,
        }
    }

    /// Where a claim the pace asks for may start: after the last short claim's `due_by`,
    /// unless the last claim from the oldest due run is `every` ago or more.
    pub(super) fn for_paced_claim(&self) -> Option<DateTime<Utc>> {
        self.after.filter(|_| self.whole_at.elapsed() < self.every)
    }

    /// After a claim that started `after` (`None`: from the oldest due run): `short_by` is
    /// its `due_by` when it came back short, `None` when it came back full or failed.
    pub(super) fn claimed(
        &mut self,
        after: Option<DateTime<Utc>>,
        short_by: Option<DateTime<Utc>>,
    ) {
        if after.is_none() {
            self.whole_at = Instant::now();
        }
        self.after = short_by;
    }

    /// Forgets the floor: the next claim starts from the oldest due run.
    pub(super) fn reset(&mut self) {
        self.after = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: u32) -> DateTime<Utc> {
        format!("2030-01-01T10:00:{second:02}Z")
            .parse()
            .expect("time")
    }

    #[test]
    fn a_paced_claim_starts_after_the_last_short_one() {
        let mut floor = ClaimFloor::new(Duration::from_secs(3600));
        assert_eq!(floor.for_paced_claim(), None, "the first claim is whole");
        floor.claimed(None, Some(at(10)));
        assert_eq!(floor.for_paced_claim(), Some(at(10)));
        floor.claimed(Some(at(10)), Some(at(12)));
        assert_eq!(floor.for_paced_claim(), Some(at(12)));
    }

    #[test]
    fn once_every_has_passed_a_paced_claim_is_whole_again() {
        let mut floor = ClaimFloor::new(Duration::ZERO);
        floor.claimed(None, Some(at(10)));
        assert_eq!(floor.for_paced_claim(), None);
    }

    #[test]
    fn a_full_or_failed_claim_or_a_reset_leaves_no_floor() {
        let mut floor = ClaimFloor::new(Duration::from_secs(3600));
        floor.claimed(None, Some(at(10)));
        floor.claimed(Some(at(10)), None);
        assert_eq!(
            floor.for_paced_claim(),
            None,
            "a full claim may leave runs behind"
        );
        floor.claimed(None, Some(at(11)));
        floor.reset();
        assert_eq!(floor.for_paced_claim(), None);
    }
}
