//! [`InMemoryLauncher`]: the launcher contract in memory, for unit tests of the worker.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Instant;

use crate::{CancelMessage, DeadLetter, Enqueued, Error, LaunchMessage, Result, RunLauncher};

/// Stores messages in memory and de-duplicates by message id, like a stream whose
/// duplicate window never ends. Can be told to fail, to exercise outage handling.
#[derive(Debug)]
pub struct InMemoryLauncher {
    max_message_bytes: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    messages: Vec<LaunchMessage>,
    dead_letters: Vec<DeadLetter>,
    cancels: Vec<CancelMessage>,
    ids: HashMap<String, u64>,
    down: bool,
    regions_down: HashSet<String>,
}

impl InMemoryLauncher {
    /// An empty queue accepting messages up to `max_message_bytes` encoded.
    pub fn new(max_message_bytes: usize) -> Self {
        InMemoryLauncher {
            max_message_bytes,
            state: Mutex::new(State::default()),
        }
    }

    /// While `down`, every publish fails with a retryable error (a broker outage).
    pub fn set_down(&self, down: bool) {
        self.lock().down = down;
    }

    /// While `down`, publishes to `region`'s launch stream fail with a retryable error and
    /// the region is not ready (a region lost or cut off).
    pub fn set_region_down(&self, region: &str, down: bool) {
        let mut state = self.lock();
        if down {
            state.regions_down.insert(region.to_string());
        } else {
            state.regions_down.remove(region);
        }
    }

    /// The dead letters stored, in order.
    pub fn dead_letters(&self) -> Vec<DeadLetter> {
        self.lock().dead_letters.clone()
    }

    /// The cancel messages stored, in order.
    pub fn cancels(&self) -> Vec<CancelMessage> {
        self.lock().cancels.clone()
    }

    /// The messages stored, in stream order.
    pub fn messages(&self) -> Vec<LaunchMessage> {
        self.lock().messages.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic in another test thread must not hide this launcher's state.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn publish(&self, message: &LaunchMessage) -> Result<Enqueued> {
        self.publish_as(message, message.msg_id())
    }

    fn publish_as(&self, message: &LaunchMessage, msg_id: String) -> Result<Enqueued> {
        let size = message.encode().len();
        if size > self.max_message_bytes {
            return Err(Error::TooLarge { size });
        }
        let mut state = self.lock();
        let region_down = message
            .region
            .as_ref()
            .is_some_and(|region| state.regions_down.contains(region));
        if state.down || region_down {
            return Err(Error::Publish {
                reason: "in-memory queue is down".into(),
            });
        }
        // Each region's stream de-duplicates on its own, as JetStream streams do.
        let id = match &message.region {
            Some(region) => format!("{region}/{msg_id}"),
            None => msg_id,
        };
        if let Some(sequence) = state.ids.get(&id) {
            return Ok(Enqueued {
                stream_sequence: *sequence,
                duplicate: true,
                acked_at: Instant::now(),
            });
        }
        state.messages.push(message.clone());
        let sequence = state.messages.len() as u64;
        state.ids.insert(id, sequence);
        Ok(Enqueued {
            stream_sequence: sequence,
            duplicate: false,
            acked_at: Instant::now(),
        })
    }
}

impl RunLauncher for InMemoryLauncher {
    async fn launch(&self, batch: &[LaunchMessage]) -> Vec<Result<Enqueued>> {
        batch.iter().map(|message| self.publish(message)).collect()
    }

    async fn redeliver(&self, batch: &[(LaunchMessage, String)]) -> Vec<Result<Enqueued>> {
        batch
            .iter()
            .map(|(message, msg_id)| self.publish_as(message, msg_id.clone()))
            .collect()
    }

    async fn is_stored(&self, _region: Option<&str>, sequence: u64) -> Result<bool> {
        // Nothing is ever lost in memory: every sequence handed out is stored.
        let stored = self.lock().messages.len() as u64;
        Ok((1..=stored).contains(&sequence))
    }

    async fn region_ready(&self, region: &str) -> bool {
        !self.lock().regions_down.contains(region)
    }

    async fn cancel(&self, batch: &[CancelMessage]) -> Vec<Result<Enqueued>> {
        batch
            .iter()
            .map(|cancel| {
                let mut state = self.lock();
                if state.down {
                    return Err(Error::Publish {
                        reason: "in-memory queue is down".into(),
                    });
                }
                if let Some(sequence) = state.ids.get(&cancel.msg_id()) {
                    return Ok(Enqueued {
                        stream_sequence: *sequence,
                        duplicate: true,
                        acked_at: Instant::now(),
                    });
                }
                state.cancels.push(cancel.clone());
                let sequence = state.cancels.len() as u64;
                state.ids.insert(cancel.msg_id(), sequence);
                Ok(Enqueued {
                    stream_sequence: sequence,
                    duplicate: false,
                    acked_at: Instant::now(),
                })
            })
            .collect()
    }

    async fn dead_letter(&self, batch: &[DeadLetter]) -> Vec<Result<Enqueued>> {
        batch
            .iter()
            .map(|letter| {
                let mut state = self.lock();
                if state.down {
                    return Err(Error::Publish {
                        reason: "in-memory queue is down".into(),
                    });
                }
                if let Some(sequence) = state.ids.get(&letter.msg_id()) {
                    return Ok(Enqueued {
                        stream_sequence: *sequence,
                        duplicate: true,
                        acked_at: Instant::now(),
                    });
                }
                state.dead_letters.push(letter.clone());
                let sequence = state.dead_letters.len() as u64;
                state.ids.insert(letter.msg_id(), sequence);
                Ok(Enqueued {
                    stream_sequence: sequence,
                    duplicate: false,
                    acked_at: Instant::now(),
                })
            })
            .collect()
    }
}
