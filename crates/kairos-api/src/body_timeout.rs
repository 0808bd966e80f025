//! [`TimedBody`]: a request body that fails with [`BodyTimeout`] when it is not complete
//! within `http.body_read_timeout_ms` of its headers, so a client announcing a large
//! `content-length` and sending nothing (or trickling) is answered 408 instead of holding
//! its connection and a handler forever.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Bytes, HttpBody};
use axum::BoxError;
use hyper::body::{Frame, SizeHint};
use tokio::time::Sleep;

/// The body did not arrive in time; found by [`BodyTimeout::in_chain`] under the extractor's
/// rejection and answered 408.
#[derive(Debug, thiserror::Error)]
#[error("the request body was not received within http.body_read_timeout_ms ({} ms)", .timeout.as_millis())]
pub(crate) struct BodyTimeout {
    /// The configured limit.
    pub timeout: Duration,
}

impl BodyTimeout {
    /// The `BodyTimeout` somewhere in `err`'s source chain, if any.
    pub(crate) fn in_chain<'a>(
        err: &'a (dyn std::error::Error + 'static),
    ) -> Option<&'a BodyTimeout> {
        let mut current = Some(err);
        while let Some(err) = current {
            if let Some(timeout) = err.downcast_ref::<BodyTimeout>() {
                return Some(timeout);
            }
            current = err.source();
        }
        None
    }
}

/// A body with a deadline, set when the request is handed to the router.
#[derive(Debug)]
pub(crate) struct TimedBody<B> {
    inner: B,
    timeout: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl<B> TimedBody<B> {
    /// `inner`, which must be complete within `timeout` from now.
    pub(crate) fn new(inner: B, timeout: Duration) -> TimedBody<B> {
        TimedBody {
            inner,
            timeout,
            deadline: Box::pin(tokio::time::sleep(timeout)),
        }
    }
}

impl<B> HttpBody for TimedBody<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        match this.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimeout {
                timeout: this.timeout,
            })))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
