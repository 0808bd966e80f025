//! The rounds of one instance that are publishing now. A round records its outcomes only
//! once every round that was publishing when its own publish ended has finished publishing
//! too: at a burst's tick the instance's rounds publish together, and their records (a full
//! row rewrite per run in PostgreSQL, on the same cores as NATS) start once the instance's
//! messages are all out instead of slowing the publishes still going. A round that starts
//! publishing later never holds an earlier one back, so a steady stream of publishes cannot
//! starve a record, and the wait ends with the round's own launch timeout.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;

/// The numbers of the rounds publishing now.
#[derive(Debug)]
pub(super) struct Publishing {
    next: AtomicU64,
    active: watch::Sender<BTreeSet<u64>>,
}

/// One round's publish; it ends when this is dropped or [`Publish::finish`]ed.
#[derive(Debug)]
pub(super) struct Publish<'a> {
    gate: &'a Publishing,
    number: u64,
    /// The round's own launch timeout, counted from its start: the longest [`Publish::finish`]
    /// waits, so the round's transaction stays idle no longer than it could without the wait.
    ends_by: tokio::time::Instant,
}

impl Publishing {
    pub(super) fn new() -> Publishing {
        Publishing {
            next: AtomicU64::new(0),
            active: watch::channel(BTreeSet::new()).0,
        }
    }

    /// A round starts publishing, for at most `launch_timeout`.
    pub(super) fn start(&self, launch_timeout: Duration) -> Publish<'_> {
        let number = self.next.fetch_add(1, Ordering::SeqCst);
        self.active.send_modify(|active| {
            active.insert(number);
        });
        let ends_by = tokio::time::Instant::now() + launch_timeout;
        Publish {
            gate: self,
            number,
            ends_by,
        }
    }

    /// Waits until every round publishing at this call has finished publishing (rounds that
    /// start after the call are not waited for).
    pub(super) fn settled(&self) -> impl Future<Output = ()> + use<'_> {
        let started = self.next.load(Ordering::SeqCst);
        let mut active = self.active.subscribe();
        async move {
            // The sender lives as long as `self`, so the wait ends only by its condition.
            let _ = active
                .wait_for(|active| active.first().is_none_or(|first| *first >= started))
                .await;
        }
    }
}

impl Publish<'_> {
    /// Ends this round's publish, then waits until the instance's rounds publishing now have
    /// finished too, or this round's launch timeout has passed.
    pub(super) async fn finish(self) {
        let gate = self.gate;
        let ends_by = self.ends_by;
        drop(self);
        let _ = tokio::time::timeout_at(ends_by, gate.settled()).await;
    }
}

impl Drop for Publish<'_> {
    fn drop(&mut self) {
        let number = self.number;
        self.gate.active.send_modify(|active| {
            active.remove(&number);
        });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Publishing;

    const LONG: Duration = Duration::from_secs(60);

    async fn settles_within(gate: &Publishing, ms: u64) -> bool {
        tokio::time::timeout(Duration::from_millis(ms), gate.settled())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_record_waits_for_the_publishes_going_on_and_not_for_later_ones() {
        let gate = Publishing::new();
        assert!(
            settles_within(&gate, 50).await,
            "nothing publishing: no wait"
        );
        let earlier = gate.start(LONG);
        let mine = gate.start(LONG);
        drop(mine);
        assert!(
            !settles_within(&gate, 50).await,
            "an earlier round is still publishing"
        );
        drop(earlier);
        assert!(
            settles_within(&gate, 50).await,
            "every earlier publish ended"
        );

        let _later = gate.start(LONG);
        let waiting = gate.settled();
        tokio::pin!(waiting);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), &mut waiting)
                .await
                .is_err(),
            "a publish that started before the wait is waited for"
        );
        let gate2 = Publishing::new();
        let before = gate2.start(LONG);
        let wait = gate2.settled();
        tokio::pin!(wait);
        let _after = gate2.start(LONG);
        drop(before);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), &mut wait)
                .await
                .is_ok(),
            "a publish that started after the wait does not hold it"
        );
    }
}
