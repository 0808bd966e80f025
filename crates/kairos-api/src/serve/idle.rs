//! Which open connection is idle, and since when: the accept loop of [`super::serve`]
//! closes the one idle the longest when every slot is taken (see the module above for what
//! counts as idle).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes, HttpBody};
use hyper::body::{Frame, SizeHint};
use tokio::sync::Notify;

/// How many idle connections the accept loop tries in turn when the one it chose starts a
/// request under its hands.
const EVICTION_ATTEMPTS: usize = 3;
/// [`Slot::state`] of a connection in a request.
const IN_REQUEST: u64 = u64::MAX;
/// [`Slot::state`] of a connection the accept loop chose to close.
const EVICTED: u64 = u64::MAX - 1;

/// The slots of the open connections. Each connection locks it twice (registered,
/// removed); only the accept loop at the limit scans it.
#[derive(Debug)]
pub(super) struct Registry {
    /// The zero of the idle instants in [`Slot::state`].
    epoch: Instant,
    slots: Mutex<Slots>,
}

#[derive(Debug, Default)]
struct Slots {
    next_id: u64,
    by_id: HashMap<u64, Arc<Slot>>,
}

impl Registry {
    pub(super) fn new() -> Registry {
        Registry {
            epoch: Instant::now(),
            slots: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The slot of a connection just accepted: idle from now.
    pub(super) fn register(self: &Arc<Self>) -> Registration {
        let slot = Arc::new(Slot {
            state: AtomicU64::new(nanos_since(self.epoch)),
            epoch: self.epoch,
            evicted: Notify::new(),
        });
        let mut slots = self.lock();
        let id = slots.next_id;
        slots.next_id += 1;
        slots.by_id.insert(id, slot.clone());
        Registration {
            registry: self.clone(),
            id,
            slot,
        }
    }

    /// Marks the connection idle the longest (the first accepted among equals) evicted and
    /// wakes its task; false when none is idle.
    pub(super) fn evict_idlest(&self) -> bool {
        let slots = self.lock();
        for _ in 0..EVICTION_ATTEMPTS {
            let idlest = slots
                .by_id
                .iter()
                .filter_map(|(id, slot)| {
                    let state = slot.state.load(Ordering::Acquire);
                    (state < EVICTED).then_some((state, *id, slot))
                })
                .min_by_key(|&(idle_since, id, _)| (idle_since, id));
            let Some((idle_since, _, slot)) = idlest else {
                return false;
            };
            if slot.evict(idle_since) {
                return true;
            }
            // It started a request since the scan read it: look again.
        }
        false
    }
}

/// A connection's entry in the [`Registry`]; dropping it removes the slot.
#[derive(Debug)]
pub(super) struct Registration {
    registry: Arc<Registry>,
    id: u64,
    pub(super) slot: Arc<Slot>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.lock().by_id.remove(&self.id);
    }
}

/// What one connection shares with the accept loop.
#[derive(Debug)]
pub(super) struct Slot {
    /// [`IN_REQUEST`], [`EVICTED`], or when the connection last became idle (nanoseconds
    /// since `epoch`). Only compare-exchange moves it out of an idle instant, so a request
    /// start and an eviction cannot both win.
    state: AtomicU64,
    epoch: Instant,
    /// Notified once, when the accept loop evicts the connection.
    pub(super) evicted: Notify,
}

impl Slot {
    /// hyper read a request's headers: the connection is in a request until the returned
    /// guard drops. A connection already evicted stays so (it is closing).
    pub(super) fn begin_request(self: &Arc<Self>) -> InRequest {
        let _ = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                (state != EVICTED).then_some(IN_REQUEST)
            });
        InRequest(self.clone())
    }

    /// Evicts the connection if it is still idle since `idle_since`.
    fn evict(&self, idle_since: u64) -> bool {
        let evicted = self
            .state
            .compare_exchange(idle_since, EVICTED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if evicted {
            // Stored if the task is not waiting yet, so the wake-up is not lost.
            self.evicted.notify_one();
        }
        evicted
    }
}

/// Nanoseconds since `epoch`, below the markers of [`Slot::state`] (u64 lasts 584 years).
fn nanos_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(EVICTED - 1)
}

/// The request in progress on a connection; dropping it makes the connection idle again.
/// hyper's HTTP/1 connection serves one request at a time, so at most one exists.
#[derive(Debug)]
pub(super) struct InRequest(Arc<Slot>);

impl Drop for InRequest {
    fn drop(&mut self) {
        let slot = &self.0;
        let idle_since = nanos_since(slot.epoch);
        let _ = slot.state.compare_exchange(
            IN_REQUEST,
            idle_since,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }
}

/// A response body carrying its connection's [`InRequest`]: the request ends when hyper
/// drops the body, after writing its last frame (or when the connection ends). A handler
/// future dropped before answering drops the guard with it.
#[derive(Debug)]
pub(super) struct ResponseBody {
    pub(super) inner: Body,
    pub(super) _in_request: InRequest,
}

impl HttpBody for ResponseBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(slot: &Slot) -> u64 {
        slot.state.load(Ordering::Acquire)
    }

    #[test]
    fn the_longest_idle_connection_is_evicted_and_none_in_a_request() {
        let registry = Arc::new(Registry::new());
        let first = registry.register();
        let second = registry.register();
        let third = registry.register();
        let _in_request = first.slot.begin_request();
        assert!(registry.evict_idlest());
        assert_eq!(state(&second.slot), EVICTED);
        assert!(state(&third.slot) < EVICTED);
        let _also_in_request = third.slot.begin_request();
        assert!(
            !registry.evict_idlest(),
            "only requests and the evicted left"
        );
    }

    #[test]
    fn a_request_idles_its_connection_again_when_it_ends() {
        let registry = Arc::new(Registry::new());
        let older = registry.register();
        let newer = registry.register();
        std::thread::sleep(std::time::Duration::from_millis(1));
        drop(older.slot.begin_request());
        assert!(state(&older.slot) > state(&newer.slot));
        assert!(registry.evict_idlest());
        assert_eq!(state(&newer.slot), EVICTED);
    }

    #[test]
    fn a_request_and_an_eviction_cannot_both_win() {
        let registry = Arc::new(Registry::new());
        let registration = registry.register();
        let slot = &registration.slot;
        // The accept loop read the idle instant, then the request started.
        let idle_since = state(slot);
        let in_request = slot.begin_request();
        assert!(!slot.evict(idle_since));
        assert_eq!(state(slot), IN_REQUEST);
        drop(in_request);
        // The other order: evicted first, the request does not take the connection back.
        let idle_since = state(slot);
        assert!(slot.evict(idle_since));
        drop(slot.begin_request());
        assert_eq!(state(slot), EVICTED);
    }
}
