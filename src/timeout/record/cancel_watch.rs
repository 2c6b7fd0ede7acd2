//! The record's cancel watch: the cancel signal of the scope the call was made in, and
//! tonic's cancellation handle (which only fails the request body it made).

use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::Code;

use super::{Record, State};
use crate::policy::cancel::CancelReason;
use crate::policy::streaming::millis;
use crate::scope::{CancelSignal, Watch};

// The caller's cancels.
//
// What the call record does when the scope the call was made in is cancelled: it
// watches the scope's signal while the call waits, and ends the call with
// `CANCELLED` and [`CancelDetails`] naming where the cancel came from — or with
// `DEADLINE_EXCEEDED` when the cause is a deadline that passed (a timeout is never
// reported as a cancel, nor the reverse).
impl Record {
    /// Watches `signal`, the cancel signal of the scope the call was made in.
    pub(crate) fn watch_cancel(&mut self, signal: Arc<CancelSignal>) {
        self.cancel = Some(Watch::new(signal));
    }

    /// Ready with the reason once the call's scope is cancelled, or the caller
    /// cancelled the call with tonic's `Request::cancellation_handle()`; registers the
    /// waiter on the first poll that has to wait.
    #[inline]
    pub(crate) fn poll_cancel(&mut self, cx: &mut Context<'_>) -> Poll<CancelReason> {
        if let Some(watch) = &mut self.cancel {
            if let Poll::Ready(reason) = watch.poll(cx) {
                return Poll::Ready(reason);
            }
        }
        if http_body::Body::is_end_stream(&self.request) {
            return Poll::Pending;
        }
        self.poll_request_cancel(cx)
    }

    /// Where the layer puts the request body it took whole (to learn of tonic's
    /// cancel, which only fails that body).
    pub(crate) fn request_watch(&mut self) -> &mut tonic::body::Body {
        &mut self.request
    }

    /// Polls the request body tonic made ([`poll_request_cancel`]).
    #[inline(never)]
    fn poll_request_cancel(&mut self, cx: &mut Context<'_>) -> Poll<CancelReason> {
        poll_request_cancel(&mut self.request, cx)
    }

    /// The call is dropped unanswered: when its scope was cancelled (not by a
    /// deadline), the drop is that cancel (the handler holding the call was dropped
    /// with it) and is counted as one; `false` otherwise.
    pub(super) fn dropped_by_cancel(&mut self) -> bool {
        let reason = self.cancel.as_ref().and_then(Watch::reason);
        match reason.filter(|r| !r.is_deadline()) {
            Some(reason) if self.state == State::Open => {
                let elapsed_ms = millis(self.start.elapsed());
                self.end_record(reason, elapsed_ms, true);
                true
            }
            _ => false,
        }
    }
}

/// Polls `request`, the request body tonic made: it fails with `CANCELLED` once the
/// caller cancels with `Request::cancellation_handle()`. Once it has said anything
/// else, or the cancel, it is emptied: nothing more to learn from it.
pub(super) fn poll_request_cancel(
    request: &mut tonic::body::Body,
    cx: &mut Context<'_>,
) -> Poll<CancelReason> {
    use http_body::Body;
    match std::pin::Pin::new(&mut *request).poll_frame(cx) {
        Poll::Ready(Some(Err(status))) if status.code() == Code::Cancelled => {
            *request = tonic::body::Body::empty();
            Poll::Ready(CancelReason::CallCancelled)
        }
        // Anything else from a body already read: nothing more to learn from it.
        Poll::Ready(Some(_)) => {
            *request = tonic::body::Body::empty();
            Poll::Pending
        }
        Poll::Ready(None) | Poll::Pending => Poll::Pending,
    }
}
