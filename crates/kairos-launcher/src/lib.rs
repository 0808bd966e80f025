//! `RunLauncher`: hands launch messages to the delivery queue and reports, per message,
//! whether the queue has stored it.
//!
//! - [`NatsLauncher`]: JetStream (stream `KAIROS_LAUNCH`, subjects `kairos.launch.>`, by
//!   default; every stream is named from `nats.stream_prefix`, see [`streams`]), with
//!   `Nats-Msg-Id` set so the stream drops duplicates inside its window. The only product
//!   crate that talks to NATS (the bench, the chaos suite and the example executor are
//!   NATS clients of their own).
//!   Dead letters go to `KAIROS_DLQ`, cancel requests to `KAIROS_CANCEL`. A run launched
//!   in a region goes to that region's launch stream ([`regions`]).
//! - [`InMemoryLauncher`]: the same contract in memory, for unit tests of the worker.
//!
//! Both pipeline a batch: every message is sent before any acknowledgement is awaited. Every
//! message carries CloudEvents and trace-context headers ([`events`]); each launch publish
//! is described as a span for export (`spans.rs`) when a subscriber wants it.

mod error;
pub mod events;
mod link;
mod memory;
mod message;
mod nats;
pub mod regions;
mod replicas;
mod spans;
pub mod status;
pub mod streams;

use std::future::Future;

pub use error::{Error, Result};
pub use link::NatsLink;
pub use memory::InMemoryLauncher;
pub use message::{CancelMessage, DeadLetter, LaunchMessage, PublishedLaunch, Source};
pub use nats::{NatsConfig, NatsLauncher};
pub use streams::Retention;

/// The queue stored a message (`duplicate` when it had stored the same id before).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enqueued {
    /// Position of the message in the stream.
    pub stream_sequence: u64,
    /// The queue already held a message with this id; nothing new was stored. A success.
    pub duplicate: bool,
    /// When the acknowledgement came in, on this instance's monotonic clock: a message of a
    /// pipelined batch is out when its own acknowledgement is, not when the last one is.
    pub acked_at: std::time::Instant,
}

/// Publishes launch messages. Implementations are safe to call from many tasks.
pub trait RunLauncher: Send + Sync {
    /// Publishes every message of `batch` and returns one outcome per message, in order.
    /// A failure of one message does not stop the others.
    fn launch(&self, batch: &[LaunchMessage])
        -> impl Future<Output = Vec<Result<Enqueued>>> + Send;

    /// Publishes the dead letters of `batch` (to the dead-letter stream), one outcome each,
    /// like [`RunLauncher::launch`].
    fn dead_letter(
        &self,
        batch: &[DeadLetter],
    ) -> impl Future<Output = Vec<Result<Enqueued>>> + Send;

    /// Publishes launch messages again, each under the given `Nats-Msg-Id` (a run whose
    /// message may have been lost: the same id de-duplicates a message that is only slow,
    /// a new one delivers again), one outcome each.
    fn redeliver(
        &self,
        batch: &[(LaunchMessage, String)],
    ) -> impl Future<Output = Vec<Result<Enqueued>>> + Send;

    /// Publishes cancel requests to executors (to the cancel stream), one outcome each,
    /// like [`RunLauncher::launch`]: an acknowledged cancel is stored, and every executor
    /// subscribed to its subject at that moment has been sent it.
    fn cancel(&self, batch: &[CancelMessage])
        -> impl Future<Output = Vec<Result<Enqueued>>> + Send;

    /// Whether the launch stream (of `region`, when given) still holds the message at
    /// `sequence` (a `duplicate` acknowledgement names the sequence of the first copy, which
    /// may be gone).
    fn is_stored(
        &self,
        region: Option<&str>,
        sequence: u64,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Whether the launch stream of `region` takes publishes now (it answers, with a
    /// leader: a quorum of its replicas).
    fn region_ready(&self, region: &str) -> impl Future<Output = bool> + Send;
}
