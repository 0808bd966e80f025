//! [`NatsLink`]: the launcher of an instance that starts while NATS may be unreachable.
//! Every role starts at once; the link connects in the background, retrying, and the roles
//! that publish or consume wait for it. `/readyz` reads its state.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::Notify;

use crate::{NatsConfig, NatsLauncher};

/// A launcher that is connected once, in the background. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct NatsLink {
    launcher: Arc<OnceLock<NatsLauncher>>,
    last_error: Arc<Mutex<Option<String>>>,
    connected: Arc<Notify>,
}

/// Longest pause between two connection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

impl NatsLink {
    /// Not connected yet.
    pub fn new() -> NatsLink {
        NatsLink::default()
    }

    /// The launcher, once connected.
    pub fn get(&self) -> Option<&NatsLauncher> {
        self.launcher.get()
    }

    /// Why it is not connected yet (the last attempt's error), when it is not.
    pub fn not_ready_reason(&self) -> Option<String> {
        if self.get().is_some() {
            return None;
        }
        let last = self.last_error.lock().expect("lock").clone();
        Some(last.unwrap_or_else(|| "connecting".to_string()))
    }

    /// Waits until connected.
    pub async fn wait(&self) -> NatsLauncher {
        loop {
            let notified = self.connected.notified();
            if let Some(launcher) = self.get() {
                return launcher.clone();
            }
            notified.await;
        }
    }

    /// Connects with `config` (and creates the launch stream), retrying with a growing
    /// pause until it succeeds; each failure is logged and kept for [`Self::not_ready_reason`].
    ///
    /// # Errors
    /// A misconfiguration ([`crate::Error::is_misconfiguration`]: a stream of this
    /// deployment's name taken by another) is returned at once instead of retried.
    pub async fn connect(&self, config: NatsConfig) -> crate::Result<()> {
        let mut pause = Duration::from_millis(200);
        loop {
            match NatsLauncher::connect(config.clone()).await {
                Ok(launcher) => {
                    let _ = self.launcher.set(launcher);
                    *self.last_error.lock().expect("lock") = None;
                    self.connected.notify_waiters();
                    tracing::info!(url = %config.url, stream = %config.stream,
                        "nats connected; launch stream ready");
                    return Ok(());
                }
                Err(err) if err.is_misconfiguration() => {
                    *self.last_error.lock().expect("lock") = Some(kairos_core::error_chain(&err));
                    return Err(err);
                }
                Err(err) => {
                    let reason = kairos_core::error_chain(&err);
                    tracing::warn!(url = %config.url, error = %reason,
                        retry_ms = pause.as_millis() as u64, "nats not reachable; retrying");
                    *self.last_error.lock().expect("lock") = Some(reason);
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_BACKOFF);
        }
    }
}
