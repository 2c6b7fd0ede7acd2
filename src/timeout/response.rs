//! What a call gives back to its caller: [`ResponseFuture`], the layer's future for
//! one call, then [`TimeoutBody`], the response body under the call's remaining
//! timers. The call's record moves from the one to the other with the answer.
//!
//! **The future** holds the call's record and the engine's `CallLoop`
//! (`crate::attempts`), which carries out the attempts and reports to the record; when
//! the response headers arrive the record moves into the body. A lean call's future
//! (`record/lean.rs`) holds its first attempt and its lean record instead: response
//! headers that are no trailers-only status are the answer, and the lean record moves
//! into the body; any other end of the attempt (a status, an error, a timer, a cancel)
//! opens the full record and hands the call to the engine, which judges that end as
//! its own.
//!
//! **The body.** Unary calls keep their single deadline until the body ends (tonic's
//! own timer stops at the response headers). Streams get SW4-002 §4.1: the initial
//! timer until the first complete message, the gap timer restarted by every complete
//! message (bytes of an unfinished message are not progress), the total cap never
//! reset, and the idle limit of long work restarted only by messages that are progress
//! (every message, unless the call has a [`crate::ProgressRule`], read once per
//! message). When one fires, the inner body is dropped (hyper resets the HTTP/2
//! stream), the caller receives `DEADLINE_EXCEEDED`, and then the end. Frames that
//! arrived before are delivered first. The body reports how it ended to the call record
//! as the engine reports its attempts, through the sink's events; the end event fires
//! exactly once (in the call record).

use std::future::Future;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::time::Instant;
use tonic::Status;
use tower_service::Service;

use super::record::{Alarm, CallRecord, LeanCall, Record};
use crate::attempts::{
    Attempt, CallEnd, CallLoop, Ended, Event, FirstEnd, HedgeContext, HedgePlan, Kept, Retries,
    Run, Sink, Spare, TakeOver, Timer,
};
use crate::policy::deadline::Progress;
use crate::policy::progress::Heard;
use crate::wire::details::DetectedBy;
use crate::wire::error::BoxError;
use crate::wire::framing::MessageCounter;
use crate::wire::status::{
    code_of_error, code_of_headers, is_server_timeout_code, lost_connection, AnswerHead,
};

type Request = http::Request<tonic::body::Body>;

pin_project! {
    /// Response future of [`super::TimeoutProfileService`].
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<S, F> {
        #[pin]
        call: Call<S, F>,
    }
}

pin_project! {
    #[project = CallProj]
    #[project_replace = CallReplace]
    #[derive(Debug)]
    enum Call<S, F> {
        // A lean call's first attempt, sent without the engine (`record/lean.rs`):
        // its record (taken once the call is answered or the engine takes over), and
        // the share of the spare a retry's handles come from when the call is retried.
        Lean {
            #[pin]
            attempt: F,
            record: LeanCall,
            spare: Option<Spare<S>>,
        },
        // The engine's attempts: over (nothing in flight) once the call is answered
        // or failed, or from the start when it was refused before it was sent. The
        // call's record while the call is in flight; it moves into the response body
        // with the answer. Taken from here rather than by replacing the whole future:
        // the record is the largest part, and every copy costs.
        Full {
            #[pin]
            attempts: CallLoop<S, F>,
            record: Option<CallRecord>,
        },
    }
}

impl<S, F> ResponseFuture<S, F> {
    /// A call whose `first` attempt is under way; `retry` carries its retries, and
    /// the spare their handles come from.
    #[inline(always)]
    pub(crate) fn start(
        first: Attempt<S, F>,
        record: CallRecord,
        retry: Option<Retries<S>>,
    ) -> Self {
        ResponseFuture {
            call: Call::Full {
                attempts: CallLoop::start(first, retry),
                record: Some(record),
            },
        }
    }

    /// A hedged call: its first attempt sends `request` through `inner` as
    /// [`ResponseFuture::start`] does; the hedges after it are made from what
    /// `hedging` kept and sent through handles taken from `spare`.
    pub(crate) fn hedged(
        inner: &mut S,
        spare: Spare<S>,
        request: Request,
        hedging: (Kept, HedgePlan, HedgeContext),
        record: CallRecord,
    ) -> Self
    where
        S: Service<Request, Future = F> + Clone,
        S::Error: Into<BoxError>,
    {
        // Sent where the attempts are kept: a closure would move them out.
        let attempts = match record.enabled_span() {
            None => CallLoop::hedged(inner, spare, request, hedging),
            Some(span) => {
                let _entered = span.enter();
                CallLoop::hedged(inner, spare, request, hedging)
            }
        };
        ResponseFuture {
            call: Call::Full {
                attempts,
                record: Some(record),
            },
        }
    }

    /// A call refused before it was sent (not a gRPC path, a malformed header,
    /// nothing left of the deadline, a delegation refused).
    pub(crate) fn failed(status: Status) -> Self {
        ResponseFuture {
            call: Call::Full {
                attempts: CallLoop::refused(status),
                record: None,
            },
        }
    }

    /// Whether the call went the lean way (and the engine has not taken over).
    #[cfg(all(test, feature = "testing"))]
    pub(crate) fn is_lean(&self) -> bool {
        matches!(self.call, Call::Lean { .. })
    }

    /// A lean call whose first `attempt` is under way, with its `record`; `spare`
    /// when the call is retried.
    #[inline(always)]
    pub(crate) fn lean(attempt: F, record: LeanCall, spare: Option<Spare<S>>) -> Self {
        ResponseFuture {
            call: Call::Lean {
                attempt,
                record,
                spare,
            },
        }
    }
}

impl<S, B> Future for ResponseFuture<S, S::Future>
where
    S: Service<Request, Response = http::Response<B>> + Clone,
    S::Error: Into<BoxError>,
    B: http_body::Body,
{
    type Output = Result<http::Response<TimeoutBody<B>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut call = self.project().call;
        if let CallProj::Lean {
            attempt, record, ..
        } = call.as_mut().project()
        {
            let end = ready!(poll_lean(attempt, record, cx));
            // The first attempt is over: dropped here, where it lies.
            let CallReplace::Lean {
                record: mut lean,
                spare,
                ..
            } = call.as_mut().project_replace(Call::over())
            else {
                unreachable!("a lean call's future holds its attempt")
            };
            let end = match end {
                Ok(response) => {
                    return Poll::Ready(Ok(response.map(|inner| TimeoutBody::lean(inner, lean))))
                }
                Err(end) => end,
            };
            // The engine takes over, with the call's full record.
            let (mut record, retries) = lean.open(spare);
            drop(lean);
            let deadlines = record.deadlines();
            match CallLoop::take_over(end, retries, &mut Run::new(&mut *record, deadlines)) {
                TakeOver::Answered(response) => {
                    record.answered(response.headers());
                    return Poll::Ready(Ok(response.map(|body| TimeoutBody::new(body, record))));
                }
                TakeOver::Failed(err) => return Poll::Ready(Err(err)),
                TakeOver::Retrying(attempts) => call.set(Call::Full {
                    attempts,
                    record: Some(record),
                }),
            }
        }
        let CallProj::Full {
            mut attempts,
            record: kept,
        } = call.project()
        else {
            unreachable!("a call's future is lean until the engine takes over")
        };
        let Some(record) = kept.as_mut() else {
            // Refused before it was sent, or polled after it completed.
            return Poll::Ready(Err(attempts.refusal().into()));
        };
        let (mut timer, record) = record.parts();
        let polled = attempts.as_mut();
        let answered = ready!(record.in_span_mut(
            #[inline(always)]
            |call| {
                let deadlines = call.deadlines();
                polled.poll(timer.as_mut(), &mut Run::new(call, deadlines), cx)
            }
        ));
        if let Ok(response) = &answered {
            record.answered(response.headers());
        }
        // The call is over: the attempt in flight, if any, is dropped here, and the
        // timer disarmed; the record moves into the body, or ends with the error.
        attempts.as_mut().finish();
        timer.clear();
        Poll::Ready(match (answered, kept.take()) {
            (Ok(response), Some(record)) => Ok(response.map(|body| TimeoutBody::new(body, record))),
            (Err(err), _) => Err(err),
            (Ok(_), None) => Err(attempts.refusal().into()),
        })
    }
}

impl<S, F> Call<S, F> {
    /// A call that is over: polled again, it answers that it is.
    fn over() -> Self {
        Call::Full {
            attempts: CallLoop::over(),
            record: None,
        }
    }
}

/// Polls a lean call's first attempt: the call's answer (response headers that are no
/// trailers-only status), or how the attempt ended otherwise, for the engine to take
/// over from.
#[inline]
fn poll_lean<F, B, E>(
    attempt: Pin<&mut F>,
    lean: &mut LeanCall,
    cx: &mut Context<'_>,
) -> Poll<Result<http::Response<B>, FirstEnd<http::Response<B>>>>
where
    F: Future<Output = Result<http::Response<B>, E>>,
    E: Into<BoxError>,
{
    let ended = match attempt.poll(cx) {
        Poll::Ready(Ok(response)) if AnswerHead::of(response.headers()).status.is_none() => {
            lean.answered();
            return Poll::Ready(Ok(response));
        }
        Poll::Ready(Ok(response)) => Ended::Answered(response),
        Poll::Ready(Err(err)) => Ended::Failed(err.into()),
        Poll::Pending => {
            return lean.poll_alarm(true, cx).map(|alarm| {
                Err(match alarm {
                    Alarm::Cancelled(reason) => FirstEnd::Cancelled(reason),
                    Alarm::Due(due) => FirstEnd::Due(due),
                })
            })
        }
    };
    let expired = lean.expired();
    Poll::Ready(Err(FirstEnd::Ended { ended, expired }))
}

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
        // A lean call's answer (`record/lean.rs`), under its deadline.
        Lean {
            #[pin]
            inner: B,
            call: LeanCall,
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

impl<B> TimeoutBody<B> {
    /// The answer of a lean call, watched with its record.
    #[inline]
    pub(crate) fn lean(inner: B, call: LeanCall) -> Self {
        TimeoutBody {
            state: State::Lean { inner, call },
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
fn progress(call: &Record, arrived: Option<&Arrived>) -> Progress {
    let Some(a) = arrived else {
        return Progress::default();
    };
    let since_start = |t: Instant| t.saturating_duration_since(call.start());
    Progress {
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

/// Polls a lean call's body once: its end recorded with the trailers' status, or the
/// call's full record opened for a timeout (the server's, or the deadline's) or a
/// cancel, which it reports as the engine's would.
fn watch_lean<B>(inner: Pin<&mut B>, call: &mut LeanCall, cx: &mut Context<'_>) -> Watched<B::Data>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    let seen = Progress::default();
    let outcome = match inner.poll_frame(cx) {
        Poll::Ready(Some(Ok(frame))) => {
            let Some(trailers) = frame.trailers_ref() else {
                return ControlFlow::Continue(Poll::Ready(Some(Ok(frame))));
            };
            let code = code_of_headers(trailers);
            if call.is_over() || !is_server_timeout_code(code, || call.deadline()) {
                call.finish(code.unwrap_or(tonic::Code::Unknown));
                return ControlFlow::Continue(Poll::Ready(Some(Ok(frame))));
            }
            let (mut record, _) = call.open::<()>(None);
            let phase = record.server_phase(0);
            let detected_by = DetectedBy::Server;
            Some(Err(record.end(CallEnd::TimedOut {
                phase,
                detected_by,
                seen,
            })))
        }
        Poll::Ready(Some(Err(e))) => {
            let e = lost_connection(e.into());
            call.finish(code_of_error(&*e));
            Some(Err(e))
        }
        Poll::Ready(None) => {
            call.finish(tonic::Code::Unknown);
            None
        }
        Poll::Pending => {
            let alarm = match call.poll_alarm(false, cx) {
                Poll::Ready(alarm) => alarm,
                Poll::Pending => return ControlFlow::Continue(Poll::Pending),
            };
            let (mut record, _) = call.open::<()>(None);
            Some(Err(record.end(match alarm {
                Alarm::Cancelled(reason) => CallEnd::Cancelled { reason, seen },
                Alarm::Due(due) => CallEnd::TimedOut {
                    phase: due.phase,
                    detected_by: DetectedBy::Client,
                    seen,
                },
            })))
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
            StateProj::Lean { inner, call } => {
                let outcome = match watch_lean(inner, call, cx) {
                    ControlFlow::Continue(passed) => return passed,
                    ControlFlow::Break(outcome) => outcome,
                };
                state.set(State::Ended);
                return Poll::Ready(outcome);
            }
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
            State::Watched { inner, .. } | State::Lean { inner, .. } => inner.is_end_stream(),
            State::Ended => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.state {
            State::Watched { inner, .. } | State::Lean { inner, .. } => inner.size_hint(),
            State::Ended => SizeHint::with_exact(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::mem::size_of;

    use super::*;

    type Channel = tonic::transport::Channel;
    type ChannelFuture = <Channel as Service<Request>>::Future;

    /// Every call in flight holds its response future, and every move of the future,
    /// or of the response body the record moves into, copies what they hold inline
    /// (`benches/README.md`: these copies were a quarter of the layer's instructions).
    /// The call's record and its one timer live in a box reused per thread
    /// (`record/boxed.rs`), so the future is the engine's call loop and a pointer: 72
    /// bytes with the locked dependencies and Rust 1.95 (392 with the record and the
    /// timer inline), and a unary body 40 (360). The bounds are exactly that: a new
    /// field must make room for itself.
    #[test]
    fn a_calls_future_and_body_stay_within_their_budget() {
        let future = size_of::<ResponseFuture<Channel, ChannelFuture>>();
        assert!(future <= 72, "response future: {future} bytes");
        let body = size_of::<TimeoutBody<tonic::body::Body>>();
        assert!(body <= 40, "response body: {body} bytes");
    }

    /// Polled again after it completed, a call's future answers `INTERNAL` and does
    /// not panic, whether the call was answered or refused before it was sent; a
    /// refusal is reported once, with its own status.
    #[tokio::test]
    async fn polled_after_completion_it_answers_internal() {
        use tower::Layer;

        let answer = tower::service_fn(|_: Request| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
        });
        let layer = super::super::TimeoutProfileLayer::new(crate::config::ProfileSet::standard());
        let mut svc = layer.without_metrics().layer(answer);
        let rows = [
            ("/sw4rm.registry.RegistryService/Heartbeat", None),
            ("/nope", Some(tonic::Code::InvalidArgument)),
        ];
        for (path, refused) in rows {
            let mut request = Request::new(tonic::body::Body::empty());
            *request.uri_mut() = http::Uri::from_static(path);
            let mut future = std::pin::pin!(svc.call(request));
            let mut poll = || {
                let mut cx = Context::from_waker(std::task::Waker::noop());
                match future.as_mut().poll(&mut cx) {
                    Poll::Ready(Ok(_)) => None,
                    Poll::Ready(Err(err)) => Some(Status::from_error(err).code()),
                    Poll::Pending => panic!("{path}: an answer at once is not pending"),
                }
            };
            assert_eq!(poll(), refused, "{path}: first poll");
            assert_eq!(poll(), Some(tonic::Code::Internal), "{path}: polled again");
        }
    }
}
