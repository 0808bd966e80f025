//! Cancel requests (`schemas/cancel.schema.json`): kairos publishes one on
//! `<prefix>.cancel.<workflow_id>` when an operator cancels a published run (or overlap
//! `cancel_other` replaces it). This executor listens with a plain subscription to
//! `<prefix>.cancel.>`, stops the run if it has it (the same key and attempt) and reports
//! `CANCELLED`; a cancel for a run it does not have yet is remembered, so a launch that
//! arrives after its cancel is reported `CANCELLED` without running.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use serde::Deserialize;
use tokio::sync::Notify;

/// The cancel message body; fields not needed here are skipped.
#[derive(Debug, Clone, Deserialize)]
pub struct CancelRequest {
    /// The run to stop.
    pub idempotency_key: String,
    /// The attempt to stop.
    pub attempt: u32,
    /// Why (for the log).
    pub reason: Option<String>,
}

/// The runs this executor is working on and the cancels it heard. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Cancels(Arc<Mutex<State>>);

/// Cancels remembered for runs this executor does not have: every executor hears every
/// cancel, and most name runs another executor took, so only the newest are kept.
const MAX_HEARD: usize = 10_000;

#[derive(Debug, Default)]
struct State {
    running: HashMap<(String, u32), Arc<Notify>>,
    heard: HashSet<(String, u32)>,
    heard_order: VecDeque<(String, u32)>,
}

impl Cancels {
    /// Registers a run about to work; `None` when a cancel for it was already heard (do
    /// not run it). The returned signal fires when a cancel arrives.
    pub fn begin(&self, key: &str, attempt: u32) -> Option<Arc<Notify>> {
        let mut state = self.lock();
        let id = (key.to_string(), attempt);
        if state.heard.contains(&id) {
            return None;
        }
        let signal = Arc::new(Notify::new());
        state.running.insert(id, signal.clone());
        Some(signal)
    }

    /// The run ended (however): it no longer takes cancels.
    pub fn end(&self, key: &str, attempt: u32) {
        let mut state = self.lock();
        let id = (key.to_string(), attempt);
        state.running.remove(&id);
        state.heard.remove(&id);
    }

    /// A cancel arrived: stops the run if it is working, else remembers it.
    pub fn hear(&self, request: &CancelRequest) {
        let mut state = self.lock();
        let id = (request.idempotency_key.clone(), request.attempt);
        match state.running.get(&id) {
            Some(signal) => signal.notify_one(),
            None => {
                if state.heard.insert(id.clone()) {
                    state.heard_order.push_back(id);
                }
                while state.heard_order.len() > MAX_HEARD {
                    if let Some(oldest) = state.heard_order.pop_front() {
                        state.heard.remove(&oldest);
                    }
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Subscribes to `<prefix>.cancel.>` and feeds every cancel request to `cancels` until the
/// connection closes.
///
/// # Errors
/// When the subscription cannot be made.
pub async fn listen(
    client: &async_nats::Client,
    prefix: &str,
    cancels: Cancels,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let mut subscription = client
        .subscribe(format!("{prefix}.cancel.>"))
        .await
        .map_err(|e| anyhow::anyhow!("subscribe to cancel requests: {e}"))?;
    // The subscription is registered with the server once a round trip has completed.
    client
        .flush()
        .await
        .map_err(|e| anyhow::anyhow!("flush: {e}"))?;
    Ok(tokio::spawn(async move {
        while let Some(message) = subscription.next().await {
            match serde_json::from_slice::<CancelRequest>(&message.payload) {
                Ok(request) => {
                    println!(
                        "executor: cancel of {} attempt {} ({})",
                        request.idempotency_key,
                        request.attempt,
                        request.reason.as_deref().unwrap_or("no reason")
                    );
                    cancels.hear(&request);
                }
                Err(err) => eprintln!("executor: not a cancel request ({err}); ignored"),
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(key: &str, attempt: u32) -> CancelRequest {
        CancelRequest {
            idempotency_key: key.into(),
            attempt,
            reason: None,
        }
    }

    #[tokio::test]
    async fn a_cancel_stops_the_run_it_names_and_is_remembered_otherwise() {
        let cancels = Cancels::default();
        let signal = cancels.begin("k", 1).expect("not cancelled");
        cancels.hear(&request("k", 2)); // another attempt: not this run
        cancels.hear(&request("k", 1));
        signal.notified().await; // the permit is stored: no lost wake-up
        cancels.end("k", 1);
        cancels.hear(&request("later", 1));
        assert!(
            cancels.begin("later", 1).is_none(),
            "cancel heard before launch"
        );
        assert!(
            cancels.begin("k", 2).is_none(),
            "attempt 2's cancel was heard"
        );
    }
}
