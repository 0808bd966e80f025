//! Optional span export over OTLP/HTTP (protobuf), set up by `serve`'s `init_tracing` when
//! `[otlp] endpoint` is set. Every opentelemetry crate is used here only.
//!
//! - [`SpanLayer`] (`otlp/layer.rs`), a tracing layer, turns the `request` spans of the API
//!   and the span events of target [`kairos_core::trace::SPAN_TARGET`] (launch publishes,
//!   applied status reports) into finished spans.
//! - [`Queue`] holds them for the export thread: bounded ([`OtlpConfig::queue_size`]), and
//!   a span that finds it full is dropped, so a slow or unreachable collector never blocks
//!   a caller nor grows memory.
//! - The export thread sends a batch every [`EXPORT_EVERY`] (or at [`MAX_BATCH`] spans),
//!   each POST bounded by `timeout_ms`. A failed batch is dropped, not retried. Failures
//!   and drops are logged once when they start and once when they end, not per batch.

mod layer;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use opentelemetry::KeyValue;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;

use crate::config::OtlpConfig;
pub use layer::{SpanLayer, ACCESS_TARGET};

/// Longest a finished span waits in the queue before its batch is sent.
pub const EXPORT_EVERY: Duration = Duration::from_secs(1);
/// Most spans in one export request.
pub const MAX_BATCH: usize = 512;

/// What the export thread is sent.
#[derive(Debug)]
enum Message {
    Span(Box<SpanData>),
    /// Send what is queued, answer, and stop.
    Flush(mpsc::Sender<()>),
}

/// The bounded hand-off from the layer to the export thread.
#[derive(Debug, Clone)]
pub struct Queue {
    sender: SyncSender<Message>,
    dropped: Arc<AtomicU64>,
}

impl Queue {
    /// Hands `span` to the export thread, or drops it (counted) when the queue is full.
    fn push(&self, span: SpanData) {
        match self.sender.try_send(Message::Span(Box::new(span))) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The running export: dropping it sends what is queued (waiting at most the export
/// timeout) and stops the thread.
#[derive(Debug)]
pub struct Exporting {
    queue: Queue,
    timeout: Duration,
}

impl Drop for Exporting {
    fn drop(&mut self) {
        let (done, finished) = mpsc::channel();
        if self.queue.sender.try_send(Message::Flush(done)).is_ok() {
            let _ = finished.recv_timeout(self.timeout + Duration::from_millis(500));
        }
    }
}

/// The layer and its export thread when `[otlp]` names an endpoint; `None` when it does not.
///
/// # Errors
/// The exporter cannot be built (a bad endpoint, an `OTEL_EXPORTER_OTLP_*` variable it
/// refuses) or its thread cannot start.
pub fn start(config: &OtlpConfig) -> anyhow::Result<Option<(SpanLayer, Exporting)>> {
    let Some(url) = config.traces_url() else {
        return Ok(None);
    };
    let timeout = Duration::from_millis(config.timeout_ms);
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url.clone())
        .with_timeout(timeout)
        .build()
        .with_context(|| format!("otlp.endpoint: an exporter to {url}"))?;
    exporter.set_resource(
        &Resource::builder()
            .with_service_name(config.service_name.clone())
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build(),
    );
    let (sender, receiver) = mpsc::sync_channel(config.queue_size);
    let queue = Queue {
        sender,
        dropped: Arc::new(AtomicU64::new(0)),
    };
    let thread = ExportThread {
        exporter,
        receiver,
        dropped: queue.dropped.clone(),
        url,
        queue_size: config.queue_size,
    };
    std::thread::Builder::new()
        .name("otlp-export".into())
        .spawn(move || thread.run())
        .context("start the OTLP export thread")?;
    let exporting = Exporting {
        queue: queue.clone(),
        timeout,
    };
    Ok(Some((SpanLayer::new(queue), exporting)))
}

/// The export thread's state.
struct ExportThread {
    exporter: opentelemetry_otlp::SpanExporter,
    receiver: Receiver<Message>,
    dropped: Arc<AtomicU64>,
    url: String,
    queue_size: usize,
}

/// Whether a trouble (failing exports, dropped spans) is going on, so it is logged when it
/// starts and when it ends.
#[derive(Debug, Default)]
struct Episodes {
    failing: bool,
    dropping: bool,
}

impl ExportThread {
    fn run(mut self) {
        let mut batch = Vec::with_capacity(MAX_BATCH);
        let mut episodes = Episodes::default();
        let mut due = Instant::now() + EXPORT_EVERY;
        loop {
            let wait = due.saturating_duration_since(Instant::now());
            match self.receiver.recv_timeout(wait) {
                Ok(Message::Span(span)) => {
                    batch.push(*span);
                    if batch.len() < MAX_BATCH {
                        continue;
                    }
                }
                Ok(Message::Flush(done)) => {
                    self.drain(&mut batch, &mut episodes);
                    let _ = done.send(());
                    let _ = self.exporter.shutdown();
                    return;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.drain(&mut batch, &mut episodes);
                    return;
                }
            }
            self.export(&mut batch, &mut episodes);
            due = Instant::now() + EXPORT_EVERY;
        }
    }

    /// Sends every span still queued.
    fn drain(&mut self, batch: &mut Vec<SpanData>, episodes: &mut Episodes) {
        while let Ok(Message::Span(span)) = self.receiver.try_recv() {
            batch.push(*span);
            if batch.len() == MAX_BATCH {
                self.export(batch, episodes);
            }
        }
        self.export(batch, episodes);
    }

    /// Sends `batch` (emptying it), and logs a change of episode.
    fn export(&mut self, batch: &mut Vec<SpanData>, episodes: &mut Episodes) {
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 && !episodes.dropping {
            tracing::warn!(
                dropped,
                queue_size = self.queue_size,
                "OTLP export queue full; spans are dropped until it drains"
            );
        } else if dropped == 0 && episodes.dropping {
            tracing::info!("OTLP export queue drains again; spans are no longer dropped");
        }
        episodes.dropping = dropped > 0;
        if batch.is_empty() {
            return;
        }
        let spans = std::mem::take(batch);
        match futures::executor::block_on(self.exporter.export(spans)) {
            Ok(()) if episodes.failing => {
                episodes.failing = false;
                tracing::info!(endpoint = %self.url, "OTLP export works again");
            }
            Ok(()) => {}
            Err(error) if !episodes.failing => {
                episodes.failing = true;
                tracing::warn!(
                    endpoint = %self.url,
                    error = %error,
                    "OTLP export failed; spans are dropped until the collector takes them"
                );
            }
            Err(_) => {}
        }
    }
}
