//! Serving the router on a TCP listener with the limits `axum::serve` does not have
//! (issue 10): a header-read timeout that is also the idle timeout, a body-read timeout, and
//! a bound on open connections, so slow or idle clients cannot hold the server's sockets.
//!
//! One accept loop: each accepted connection takes a permit of a semaphore sized
//! [`ServeLimits::max_connections`] and is served by hyper's HTTP/1 connection with a
//! header-read timer; a connection over the limit is closed at once (counted and logged once
//! per burst) instead of queueing, so file descriptors stay below the process limit and
//! `accept` never fails with "too many open files".

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt;

use crate::body_timeout::TimedBody;

/// How long to wait after a failed `accept` (for example out of file descriptors) before
/// the next one, so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The limits of [`serve`] (`[http]` in the config).
#[derive(Debug, Clone, Copy)]
pub struct ServeLimits {
    /// Longest wait for a request's line and headers, counted from the moment the
    /// connection waits for them: right after accept, and after each answer on a kept-alive
    /// connection. So it is also the idle timeout: a connection that sends nothing (or
    /// trickles its headers) is closed after it.
    pub header_read_timeout: Duration,
    /// Longest time to receive a request body, counted from the end of its headers. A body
    /// still incomplete then is answered 408 and the connection closed.
    pub body_read_timeout: Duration,
    /// Most connections open at once; one more is closed as soon as it is accepted.
    pub max_connections: usize,
}

/// Serves `router` on `listener` within `limits` until `shutdown` resolves, then stops
/// accepting and lets open connections finish their request (idle ones close at once).
///
/// # Errors
/// None today; `accept` failures are logged and retried after a short pause.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ServeLimits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let mut saturated = false;
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(err) => {
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            // Dropping the stream closes it: the client sees the connection end at once.
            crate::metrics::connection_refused();
            if !saturated {
                tracing::warn!(
                    max_connections = limits.max_connections,
                    "connection limit reached; closing new connections until one ends"
                );
                saturated = true;
            }
            continue;
        };
        saturated = false;
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let body_timeout = limits.body_read_timeout;
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let request = request.map(|body| TimedBody::new(body, body_timeout));
            router.clone().oneshot(request)
        });
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            // Timeouts and resets end connections all the time; they are not errors of ours.
            if let Err(err) = connection.await {
                tracing::debug!(error = %err, "connection ended");
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
