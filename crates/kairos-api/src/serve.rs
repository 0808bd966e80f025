//! Serving the router on a TCP listener with the limits `axum::serve` does not have: a
//! header-read timeout that is also the idle timeout, a body-read timeout, and a bound on
//! open connections, so slow or idle clients cannot hold the server's sockets.
//!
//! One accept loop: each accepted connection takes a permit of a semaphore sized
//! [`ServeLimits::max_connections`] and is served by hyper's HTTP/1 connection with a
//! header-read timer. When every permit is taken, the loop closes the connection that has
//! been idle the longest and serves the new one in its slot, so a flood of silent or slow
//! clients only pushes itself out and `/healthz`, `/readyz` and real callers still get in.
//! Only when no open connection is idle (all are in a request) is the new one closed at
//! once, instead of queueing, so file descriptors stay below the process limit and `accept`
//! never fails with "too many open files". Evictions and refusals are counted and each
//! logged once per burst (until a new connection finds a free slot again).
//!
//! Idle means waiting for a request's headers: just accepted and silent, trickling its
//! headers, or kept alive after an answer. A request is in progress from the moment hyper
//! hands its headers to the service until hyper drops the response body (written to the
//! end, or abandoned); a client still sending its request body is in a request, which the
//! body-read timeout bounds. Each connection shares a [`Slot`] with the accept loop, one
//! atomic word changed only by compare-exchange, so the loop never evicts a connection
//! whose request has started. Two narrow cases count as idle: a request whose headers have
//! arrived but that hyper has not yet handed to the service (evicted in that instant, the
//! client sees its connection closed without an answer, as when an idle timeout races a
//! request), and the last bytes of an answer still being flushed after its body was
//! dropped (hyper starts the header timer, the idle timeout, at that same moment).

mod idle;

use std::convert::Infallible;
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
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;

use crate::body_timeout::TimedBody;
use idle::{Registry, ResponseBody};

/// How long to wait after a failed `accept` (for example out of file descriptors) before
/// the next one, so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Longest wait for the slot of an evicted connection (its task drops the permit as soon
/// as it runs, normally within microseconds); the new connection is closed after it.
const EVICTION_WAIT: Duration = Duration::from_millis(100);

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
    /// Most connections open at once. One more takes the slot of the connection idle the
    /// longest, which is closed; it is closed as soon as accepted when none is idle.
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
    let registry = Arc::new(Registry::new());
    let graceful = GracefulShutdown::new();
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let mut burst = Burst::default();
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
        let Some(permit) = admit(&permits, &registry, &mut burst, limits.max_connections).await
        else {
            // Dropping the stream closes it: the client sees the connection end at once.
            continue;
        };
        let _ = stream.set_nodelay(true);
        let registration = registry.register();
        let slot = registration.slot.clone();
        let router = router.clone();
        let body_timeout = limits.body_read_timeout;
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            // hyper calls the service as soon as it has read the request's headers.
            let in_request = slot.begin_request();
            let request = request.map(|body| TimedBody::new(body, body_timeout));
            let response = router.clone().oneshot(request);
            async move {
                let response = response.await?;
                Ok::<_, Infallible>(response.map(|inner| ResponseBody {
                    inner,
                    _in_request: in_request,
                }))
            }
        });
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            tokio::select! {
                // Timeouts and resets end connections all the time; they are not errors of
                // ours.
                ended = connection => if let Err(err) = ended {
                    tracing::debug!(error = %err, "connection ended");
                },
                // Dropping the connection closes its socket.
                () = registration.slot.evicted.notified() => {
                    tracing::debug!("idle connection closed for a new one");
                }
            }
            // Out of the registry before the permit lets the next connection in.
            drop(registration);
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// A permit for a new connection: a free one, else that of the connection idle the longest,
/// closed for it. `None` (close the new connection) when no connection is idle.
async fn admit(
    permits: &Arc<Semaphore>,
    registry: &Registry,
    burst: &mut Burst,
    max_connections: usize,
) -> Option<OwnedSemaphorePermit> {
    if let Ok(permit) = permits.clone().try_acquire_owned() {
        *burst = Burst::default();
        return Some(permit);
    }
    if registry.evict_idlest() {
        crate::metrics::idle_connection_evicted();
        if !burst.evicting {
            tracing::warn!(
                max_connections,
                "connection limit reached; closing the longest idle connection for each new one"
            );
            burst.evicting = true;
        }
        let freed = tokio::time::timeout(EVICTION_WAIT, permits.clone().acquire_owned()).await;
        if let Ok(Ok(permit)) = freed {
            return Some(permit);
        }
    }
    crate::metrics::connection_refused();
    if !burst.refusing {
        tracing::warn!(
            max_connections,
            "connection limit reached and every connection is in a request; closing new \
             connections until one ends"
        );
        burst.refusing = true;
    }
    None
}

/// What the current burst at the connection limit has logged; cleared when a new
/// connection finds a free slot.
#[derive(Debug, Default)]
struct Burst {
    evicting: bool,
    refusing: bool,
}
