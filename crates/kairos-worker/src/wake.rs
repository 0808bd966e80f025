//! The wake-up arm both loops share: a LISTEN connection on one channel that is opened when
//! missing and dropped when broken, so a lost connection can neither stop a loop nor make it
//! spin. Signals are only an optimisation; every loop also caps its sleep.

use kairos_store::wakeups::Wakeups;
use kairos_store::PgPool;

/// A loop's LISTEN connection on `channel`, when it has one.
#[derive(Debug)]
pub(crate) struct Wake {
    channel: &'static str,
    who: &'static str,
    listening: Option<Wakeups>,
}

impl Wake {
    /// Not listening yet; `who` names the loop in logs.
    pub(crate) fn new(channel: &'static str, who: &'static str) -> Wake {
        Wake {
            channel,
            who,
            listening: None,
        }
    }

    /// Opens the LISTEN connection when there is none (at start, and after it was lost).
    pub(crate) async fn ensure(&mut self, pool: &PgPool) {
        if self.listening.is_some() {
            return;
        }
        match Wakeups::listen(pool, self.channel).await {
            Ok(listening) => self.listening = Some(listening),
            Err(err) if crate::outage::failed("wake-ups", &err) => {}
            Err(err) => tracing::warn!(
                loop_name = self.who,
                error = %crate::error_chain(&err),
                "cannot listen for wake-ups; polling every tick"
            ),
        }
    }

    /// Resolves on the next signal; never, when not listening. A lost connection is
    /// dropped here (and re-opened by [`Wake::ensure`]).
    pub(crate) async fn next(&mut self) {
        let Some(listening) = &mut self.listening else {
            return std::future::pending().await;
        };
        if let Err(err) = listening.next().await {
            tracing::warn!(loop_name = self.who, error = %crate::error_chain(&err),
                "lost the LISTEN connection");
            self.listening = None;
        }
    }
}
