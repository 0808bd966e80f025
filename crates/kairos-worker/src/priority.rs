//! Launches first: while a dispatcher round of this process records or publishes a wave, the
//! status intake of this process starts no new batch, for at most [`MAX_YIELD`] each time.
//! On a machine short of cores, PostgreSQL and the broker then serve the launches before the
//! reports; the reports wait in the intake's queue and are applied once the launches are
//! out. At a burst's tick every instance's rounds launch at once, so every instance's
//! intake steps aside together.

use std::sync::LazyLock;
use std::time::Duration;

use tokio::sync::watch;

/// The longest an intake batch waits for launches to end: a steady stream of waves slows
/// the reports, it never stops them.
pub const MAX_YIELD: Duration = Duration::from_secs(1);

/// How many waves of this process are being recorded or published now.
static LAUNCHING: LazyLock<watch::Sender<usize>> = LazyLock::new(|| watch::channel(0).0);

/// A wave being recorded or published; the intake yields until every one is dropped.
#[derive(Debug)]
pub(crate) struct Launching(());

impl Launching {
    /// A wave starts its record or its publish.
    pub(crate) fn start() -> Launching {
        LAUNCHING.send_modify(|waves| *waves += 1);
        Launching(())
    }
}

impl Drop for Launching {
    fn drop(&mut self) {
        LAUNCHING.send_modify(|waves| *waves -= 1);
    }
}

/// Waits until no wave of this process is being recorded or published, or `at_most` has
/// passed.
pub(crate) async fn launches_out(at_most: Duration) {
    let mut waves = LAUNCHING.subscribe();
    let _ = tokio::time::timeout(at_most, waves.wait_for(|waves| *waves == 0)).await;
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{launches_out, Launching};

    #[tokio::test]
    async fn the_intake_waits_for_the_launches_and_no_longer_than_its_limit() {
        let started = Instant::now();
        launches_out(Duration::from_secs(5)).await;
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "nothing launching: no wait"
        );

        let launching = Launching::start();
        let started = Instant::now();
        launches_out(Duration::from_millis(200)).await;
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(200) && waited < Duration::from_secs(2),
            "a launch going on holds the intake up to the limit ({waited:?})"
        );

        let ends = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            drop(launching);
        });
        let started = Instant::now();
        launches_out(Duration::from_secs(5)).await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "the wait ends when the launch does"
        );
        ends.await.expect("join");
    }
}
