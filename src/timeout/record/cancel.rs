//! What the call record does when the scope the call was made in is cancelled: it
//! watches the scope's signal while the call waits, and ends the call with
//! `CANCELLED` and [`CancelDetails`] naming where the cancel came from — or with
//! `DEADLINE_EXCEEDED` when the cause is a deadline that passed (a timeout is never
//! reported as a cancel, nor the reverse).

use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::time::Instant;
use tonic::{Code, Status};

use super::{Record, State};
use crate::policy::cancel::CancelReason;
use crate::policy::deadline::{Phase, Progress};
use crate::policy::streaming::millis;
use crate::scope::{CancelSignal, Watch};
use crate::wire::cancel::CancelDetails;
use crate::wire::details::DetectedBy;

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

    /// Polls the request body tonic made: it fails with `CANCELLED` once the caller
    /// cancels (out of line: most calls carry no body to watch).
    #[inline(never)]
    fn poll_request_cancel(&mut self, cx: &mut Context<'_>) -> Poll<CancelReason> {
        use http_body::Body;
        match std::pin::Pin::new(&mut self.request).poll_frame(cx) {
            Poll::Ready(Some(Err(status))) if status.code() == Code::Cancelled => {
                self.request = tonic::body::Body::empty();
                Poll::Ready(CancelReason::CallCancelled)
            }
            // Anything else from a body already read: nothing more to learn from it.
            Poll::Ready(Some(_)) => {
                self.request = tonic::body::Body::empty();
                Poll::Pending
            }
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }

    /// The call was cancelled by its scope after it was sent: ends the record and
    /// gives the status (the caller drops the call, and hyper resets the stream).
    pub(super) fn cancelled(&mut self, reason: CancelReason, seen: &Progress) -> Status {
        self.end_cancelled(reason, seen, true)
    }

    /// The call was made in a scope already cancelled: not sent.
    pub(crate) fn not_sent(&mut self, reason: CancelReason) -> Status {
        self.end_cancelled(reason, &Progress::default(), false)
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

    fn end_cancelled(&mut self, reason: CancelReason, seen: &Progress, sent: bool) -> Status {
        if reason.is_deadline() {
            return self.timed_out(Phase::Total, seen, DetectedBy::Client);
        }
        // A deadline already passed wins over a cancel that comes after it: on a busy
        // runtime the call's task can first run after both.
        if let Some(due) = self.next_due(*seen).filter(|d| d.at <= Instant::now()) {
            return self.timed_out(due.phase, seen, DetectedBy::Client);
        }
        let elapsed_ms = millis(self.start.elapsed());
        self.end_record(reason, elapsed_ms, sent);
        let profile = self.shared.profiles.get(self.profile);
        let labels = self.labels();
        let details = CancelDetails {
            reason,
            profile_name: profile.profile.name.to_string(),
            service: labels.service.to_string(),
            method: labels.method.to_string(),
            elapsed_ms,
            sent,
            effect: Some(self.effect(seen, sent)),
        };
        let mut status = details.to_status();
        self.mark_attempts(&mut status);
        status
    }

    /// Ends the record of a cancelled call, once: the duration (as `CANCELLED`), the
    /// cancel counter by cause, and an INFO event.
    fn end_record(&mut self, reason: CancelReason, elapsed_ms: u64, sent: bool) {
        if self.state != State::Open {
            return;
        }
        self.state = State::Ended;
        self.record(false, || Code::Cancelled);
        if let Some(instruments) = &self.shared.settings.instruments {
            instruments.cancelled(reason, &self.labels().attrs);
        }
        let labels = self.labels();
        let profile = &self.shared.profiles.get(self.profile).profile.name;
        call_event!(
            info,
            self.span,
            (labels.service, labels.method, profile),
            elapsed_ms,
            cancel_reason = reason.as_str(),
            sent,
            "SW4RM RPC cancelled by its scope"
        );
    }
}
