//! The layer's response body, [`TimeoutBody`]: a response's body under the call's
//! remaining timers, with the call's record, which moved into it from the response future with the answer.
//!
//! Unary calls keep their single deadline until the body ends (tonic's own timer
//! stops at the response headers). Streams get SW4-002 §4.1: the initial timer until
//! the first complete message, the gap timer restarted by every complete message
//! (bytes of an unfinished message are not progress), the total cap never reset, and
//! the idle limit of long work restarted only by messages that are progress (every
//! message, unless the call has a [`crate::ProgressRule`], read once per message).
//! When one fires, the inner body is dropped (hyper resets the HTTP/2 stream), the
//! caller receives `DEADLINE_EXCEEDED`, and then the end. Frames that arrived before
//! are delivered first. The body reports how it ended to the call's record as the
//! engine reports its attempts, through the sink's events; the end event fires
//! exactly once (in the record).

use std::ops::ControlFlow;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::time::Instant;

use super::record::{CallRecord, Record};
use crate::attempts::{CallEnd, Event, Sink, Timer};
use crate::policy::deadline::Received;
use crate::policy::progress::Heard;
use crate::wire::details::DetectedBy;
use crate::wire::error::BoxError;
use crate::wire::framing::MessageCounter;
use crate::wire::status::{
    code_of_error, code_of_headers, is_server_timeout_code, lost_connection,
};

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
            // The record, and in its box the call's timer.
            call: CallRecord,
            // A stream's count of what arrived (boxed: a unary body carries 8 bytes,
            // not 120, through every move of the response).
            stream: Option<Box<Arrived>>,
        },
        // The body ended, failed or timed out: the inner body (and with it the
        // HTTP/2 stream) and the timers are gone.
        Ended,
    }
}

/// What a stream has received: its messages, when the last arrived, and the progress
/// among them.
#[derive(Debug, Default)]
struct Arrived {
    messages: MessageCounter,
    last_message: Option<Instant>,
    progress: Seen,
}

impl Arrived {
    /// A stream's count, reading payloads when the call has a progress rule (out of
    /// line: the unary path builds its body in place).
    #[inline(never)]
    fn boxed(call: &CallRecord) -> Option<Box<Arrived>> {
        let messages = match call.progress_rule() {
            Some(_) => MessageCounter::reading(),
            None => MessageCounter::default(),
        };
        Some(Box::new(Arrived {
            messages,
            ..Arrived::default()
        }))
    }
}

/// The progress a stream has made: messages that were progress, when the last one
/// arrived, and its marker.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    count: u64,
    last: Option<Instant>,
    marker: Option<u64>,
}

impl<B> TimeoutBody<B> {
    #[inline]
    pub(crate) fn new(inner: B, call: CallRecord) -> Self {
        let stream = match call.streaming() {
            true => Arrived::boxed(&call),
            false => None,
        };
        TimeoutBody {
            state: State::Watched {
                inner,
                call,
                stream,
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

/// What the call has received so far (nothing, for a unary call).
fn progress(call: &Record, arrived: Option<&Arrived>) -> Received {
    let Some(a) = arrived else {
        return Received::default();
    };
    let since_start = |t: Instant| t.saturating_duration_since(call.start());
    Received {
        messages: a.messages.complete,
        last_message: a.last_message.map(since_start),
        last_progress: a.progress.last.map(since_start),
        progress: a.progress.count,
        marker: a.progress.marker,
    }
}

/// Feeds one data frame of a stream: counts its complete messages and reads each with
/// the call's progress rule (every message is progress without one).
fn feed(call: &Record, data: &impl bytes::Buf, arrived: &mut Arrived) {
    let Arrived {
        messages,
        last_message: last,
        progress: seen,
    } = arrived;
    let rule = call.progress_rule();
    let (mut moved, mut marker) = (0u64, None);
    let complete = messages.feed_with(data, |m| {
        let heard = match (rule, m.payload) {
            (Some(rule), Some(payload)) if !m.compressed => rule.read(payload),
            _ => Heard::progress(None),
        };
        if heard.is_progress() {
            moved += 1;
            marker = heard.marker().or(marker);
        }
    });
    if complete == 0 {
        return;
    }
    let now = Instant::now();
    *last = Some(now);
    if moved > 0 {
        seen.count += moved;
        seen.last = Some(now);
        seen.marker = marker.or(seen.marker);
    }
}

/// What one poll of a watched body's inner body means: a frame or a wait to pass on
/// as it is (`Continue`), or the body's end (`Break`: its last item, or none), after
/// which the inner body is dropped.
type Watched<D> =
    ControlFlow<Option<Result<Frame<D>, BoxError>>, Poll<Option<Result<Frame<D>, BoxError>>>>;

/// Polls a watched body's inner body once, with the call's record and timer.
fn watch_frame<B>(
    inner: Pin<&mut B>,
    call: &mut Record,
    mut timer: Pin<&mut Timer>,
    stream: Option<&mut Arrived>,
    cx: &mut Context<'_>,
) -> Watched<B::Data>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    let outcome = match inner.poll_frame(cx) {
        Poll::Ready(Some(Ok(frame))) => {
            if let Some(data) = frame.data_ref() {
                if let Some(arrived) = stream {
                    feed(call, data, arrived);
                }
                return ControlFlow::Continue(Poll::Ready(Some(Ok(frame))));
            }
            let Some(trailers) = frame.trailers_ref() else {
                return ControlFlow::Continue(Poll::Ready(Some(Ok(frame))));
            };
            let now = progress(call, stream.as_deref());
            // The status, read once: for the server's timeout and the call's end.
            let code = code_of_headers(trailers);
            if call.is_open() && is_server_timeout_code(code, || call.next_due(now).map(|d| d.at)) {
                Some(Err(call.end(CallEnd::TimedOut {
                    phase: call.server_phase(now.messages),
                    detected_by: DetectedBy::Server,
                    seen: now,
                })))
            } else {
                let code = Some(code.unwrap_or(tonic::Code::Unknown));
                call.on(Event::Finished { code });
                timer.as_mut().clear();
                return ControlFlow::Continue(Poll::Ready(Some(Ok(frame))));
            }
        }
        Poll::Ready(Some(Err(e))) => {
            let e = lost_connection(e.into());
            let code = Some(code_of_error(&*e));
            call.on(Event::Finished { code });
            Some(Err(e))
        }
        Poll::Ready(None) => {
            call.on(Event::Finished { code: None });
            None
        }
        Poll::Pending if !call.is_open() => return ControlFlow::Continue(Poll::Pending),
        Poll::Pending => {
            let now = progress(call, stream.as_deref());
            match call.poll_cancel(cx) {
                // The scope was cancelled: the stream is reset like a timeout's.
                Poll::Ready(reason) => {
                    Some(Err(call.end(CallEnd::Cancelled { reason, seen: now })))
                }
                Poll::Pending => {
                    let Some(due) = call.next_due(now) else {
                        return ControlFlow::Continue(Poll::Pending);
                    };
                    // Progress only moves the instant later: the timer re-arms lazily.
                    if timer.poll_until(due.at, cx).is_pending() {
                        return ControlFlow::Continue(Poll::Pending);
                    }
                    Some(Err(call.end(CallEnd::TimedOut {
                        phase: due.phase,
                        detected_by: DetectedBy::Client,
                        seen: now,
                    })))
                }
            }
        }
    };
    ControlFlow::Break(outcome)
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
        let (inner, call, stream) = match state.as_mut().project() {
            StateProj::Watched {
                inner,
                call,
                stream,
            } => (inner, call, stream),
            StateProj::Ended => return Poll::Ready(None),
        };
        let (timer, call) = call.parts();
        let stream = stream.as_deref_mut();
        let watched = call.in_span_mut(
            #[inline(always)]
            |call| watch_frame(inner, call, timer, stream, cx),
        );
        let outcome = match watched {
            ControlFlow::Continue(passed) => return passed,
            ControlFlow::Break(outcome) => outcome,
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
