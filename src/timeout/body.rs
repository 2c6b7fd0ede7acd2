//! [`TimeoutBody`]: the response body under the call's remaining timers.
//!
//! Unary calls keep their single deadline until the body ends (tonic's own timer
//! stops at the response headers). Streams get SW4-002 §4.1: the initial timer until
//! the first complete message, the gap timer restarted by every complete message
//! (bytes of an unfinished message are not progress), the total cap never reset.
//! When one fires, the inner body is dropped (hyper resets the HTTP/2 stream), the
//! caller receives `DEADLINE_EXCEEDED`, and then the end. Frames that arrived before
//! are delivered first. The end event fires exactly once (in the call record).

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::time::Instant;

use super::record::CallRecord;
use crate::attempts::timer::Timer;
use crate::policy::deadline::Progress;
use crate::wire::details::DetectedBy;
use crate::wire::error::BoxError;
use crate::wire::framing::MessageCounter;
use crate::wire::status::{code_of_error, code_of_headers, is_server_timeout_code};

pin_project! {
    /// Response body of [`super::TimeoutProfileService`].
    #[derive(Debug)]
    pub struct TimeoutBody<B> {
        #[pin]
        state: State<B>,
    }
}

pin_project! {
    #[project = StateProj]
    #[derive(Debug)]
    enum State<B> {
        Watched {
            #[pin]
            inner: B,
            #[pin]
            timer: Timer,
            call: CallRecord,
            messages: MessageCounter,
            last_message: Option<Instant>,
        },
        // The body ended, failed or timed out: the inner body (and with it the
        // HTTP/2 stream) and the timers are gone.
        Ended,
    }
}

impl<B> TimeoutBody<B> {
    pub(crate) fn new(inner: B, call: CallRecord) -> Self {
        TimeoutBody {
            state: State::Watched {
                inner,
                timer: Timer::new(),
                call,
                messages: MessageCounter::default(),
                last_message: None,
            },
        }
    }
}

impl<B> Default for TimeoutBody<B> {
    /// An empty body, watching nothing: what tonic's `InterceptedService` answers with
    /// when an interceptor rejects a call before it reaches the layer.
    ///
    /// ```
    /// use http_body::Body;
    /// let body = sw4rm_timeouts::timeout::TimeoutBody::<tonic::body::Body>::default();
    /// assert!(body.is_end_stream());
    /// ```
    fn default() -> Self {
        TimeoutBody {
            state: State::Ended,
        }
    }
}

fn progress(call: &CallRecord, messages: &MessageCounter, last: Option<Instant>) -> Progress {
    Progress {
        messages: messages.complete,
        last_message: last.map(|t| t.saturating_duration_since(call.start())),
    }
}

impl<B> Body for TimeoutBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, BoxError>>> {
        let mut state = self.project().state;
        let StateProj::Watched {
            inner,
            mut timer,
            call,
            messages,
            last_message,
        } = state.as_mut().project()
        else {
            return Poll::Ready(None);
        };
        let _span = call.entered();
        let outcome = match inner.poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    if call.streaming() && messages.feed(data) > 0 {
                        *last_message = Some(Instant::now());
                    }
                    return Poll::Ready(Some(Ok(frame)));
                }
                let Some(trailers) = frame.trailers_ref() else {
                    return Poll::Ready(Some(Ok(frame)));
                };
                let now = progress(call, messages, *last_message);
                // The status, read once: for the server's timeout and the call's end.
                let code = code_of_headers(trailers);
                if call.is_open()
                    && is_server_timeout_code(code, || call.next_due(now).map(|d| d.at))
                {
                    let phase = call.server_phase(messages.complete);
                    Some(Err(call
                        .timed_out(phase, messages.complete, DetectedBy::Server)
                        .into()))
                } else {
                    call.finish(|| code.unwrap_or(tonic::Code::Unknown));
                    timer.as_mut().clear();
                    return Poll::Ready(Some(Ok(frame)));
                }
            }
            Poll::Ready(Some(Err(e))) => {
                let e: BoxError = e.into();
                call.finish(|| code_of_error(&*e));
                Some(Err(e))
            }
            Poll::Ready(None) => {
                call.finish_without_trailers();
                None
            }
            Poll::Pending if !call.is_open() => return Poll::Pending,
            Poll::Pending => {
                let Some(due) = call.next_due(progress(call, messages, *last_message)) else {
                    return Poll::Pending;
                };
                // Progress only moves the instant later: the timer re-arms lazily.
                ready!(timer.poll_until(due.at, cx));
                Some(Err(call
                    .timed_out(due.phase, messages.complete, DetectedBy::Client)
                    .into()))
            }
        };
        // Drop the inner body now: hyper resets the HTTP/2 stream if it was still open.
        state.set(State::Ended);
        Poll::Ready(outcome)
    }

    fn is_end_stream(&self) -> bool {
        match &self.state {
            State::Watched { inner, .. } => inner.is_end_stream(),
            State::Ended => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.state {
            State::Watched { inner, .. } => inner.size_hint(),
            State::Ended => SizeHint::with_exact(0),
        }
    }
}
