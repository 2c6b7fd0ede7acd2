//! [`ResponseFuture`]: the call loop. The call's first timer runs from the moment the
//! RPC is called; under it the loop runs attempts (`retry/attempt.rs`) one after
//! another, with a backoff between two. The first is sent through the layer's own
//! handle on the inner service when it is ready at once; later attempts go through
//! handles taken from the spare the call's retry state shares (`retry/spare.rs`). A
//! hedged call runs its concurrent attempts
//! instead (`hedged.rs`). When the response headers arrive the call record moves into
//! the [`TimeoutBody`]. What each attempt's end means is `ending.rs`.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use pin_project_lite::pin_project;
use tokio::time::Instant;
use tonic::Status;
use tower_service::Service;

use super::body::TimeoutBody;
use super::ending::{attempt_timed_out, judge, Verdict};
use super::hedged::poll_hedges;
use super::record::CallRecord;
use crate::policy::deadline::{Due, Phase, Progress};
use crate::retry::{Attempt, HedgeContext, HedgePlan, Hedges, Kept, Resend, Retries, Spare};
use crate::timer::Timer;
use crate::wire::details::DetectedBy;
use crate::wire::error::BoxError;

type Request = http::Request<tonic::body::Body>;

pin_project! {
    /// Response future of [`super::TimeoutProfileService`].
    #[derive(Debug)]
    pub struct ResponseFuture<S, F> {
        #[pin]
        kind: Kind<S, F>,
    }
}

pin_project! {
    #[project = KindProj]
    #[project_replace = KindReplace]
    #[derive(Debug)]
    enum Kind<S, F> {
        // The call in flight.
        Calling {
            #[pin]
            step: Step<S, F>,
            // The call's one timer while it waits for response headers: the earlier
            // of its first deadline (a stream's initial or total timer) and the
            // attempt's own timeout, armed at the first wait.
            #[pin]
            timer: Timer,
            record: CallRecord,
            // Retries inside the deadline, with the spare their handles on the inner
            // service come from; `None` for a call sent once. Ended (its box given
            // back) when the call is.
            retry: Option<Retries<S>>,
        },
        // Refused before it was sent (not a gRPC path, a malformed header, nothing
        // left of the deadline, a delegation refused).
        Refused { status: Status },
        // Answered, failed, or refused and reported.
        Over,
    }
}

pin_project! {
    #[project = StepProj]
    #[project_ref = StepRef]
    #[project_replace = StepReplace]
    #[derive(Debug)]
    enum Step<S, F> {
        Attempting { #[pin] attempt: Attempt<S, F> },
        // Between two attempts: the next one is made and waits for the backoff on a
        // timer of its own (both boxed: only a retried call pays for their size).
        Backoff { timer: Pin<Box<Timer>>, resume: Instant, resend: Box<Resend<S>> },
        // Concurrent attempts of a hedged call (boxed: only a hedged call pays for
        // them).
        Hedging { hedges: Pin<Box<Hedges<S, F>>> },
    }
}

impl<S, F> ResponseFuture<S, F> {
    /// A call whose first attempt sends `request` through `inner`, the layer's own
    /// handle on the inner service, if it is ready now (as a plain tonic call uses its
    /// client's channel; otherwise the attempt waits on it, see [`Attempt::start`]).
    /// `retry` carries its retries, and the spare their handles come from.
    #[inline(always)]
    pub(crate) fn start(
        inner: &mut S,
        request: Request,
        record: CallRecord,
        retry: Option<Retries<S>>,
    ) -> Self
    where
        S: Service<Request, Future = F> + Clone,
        S::Error: Into<BoxError>,
    {
        let until = retry.as_ref().and_then(|r| r.first_until(record.start()));
        let attempt = {
            let _span = record.entered();
            Attempt::start(inner, request, until)
        };
        ResponseFuture {
            kind: Kind::Calling {
                step: Step::Attempting { attempt },
                timer: Timer::new(),
                record,
                retry,
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
        let first = {
            let _span = record.entered();
            Attempt::start(inner, request, None)
        };
        ResponseFuture {
            kind: Kind::Calling {
                step: Step::Hedging {
                    hedges: Box::pin(Hedges::new(spare, first, hedging)),
                },
                timer: Timer::new(),
                record,
                retry: None,
            },
        }
    }

    /// A call refused before it was sent.
    pub(crate) fn failed(status: Status) -> Self {
        ResponseFuture {
            kind: Kind::Refused { status },
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
        let mut kind = self.project().kind;
        let answered = match kind.as_mut().project() {
            KindProj::Calling {
                step,
                timer,
                record,
                retry,
            } => {
                let _span = record.entered();
                ready!(run(step, timer, record, retry, cx))
            }
            KindProj::Refused { .. } | KindProj::Over => Err(None),
        };
        // The call is over. Dropping the attempt in flight drops the inner call:
        // hyper resets the HTTP/2 stream, and the server sees the cancel.
        let mut over = kind.project_replace(Kind::Over);
        if let KindReplace::Calling { retry, .. } = &mut over {
            end(retry.take());
        }
        Poll::Ready(match (answered, over) {
            (Ok(response), KindReplace::Calling { mut record, .. }) => {
                let (parts, body) = response.into_parts();
                record.answered(&parts.headers);
                Ok(http::Response::from_parts(
                    parts,
                    TimeoutBody::new(body, record),
                ))
            }
            (Err(Some(err)), _) => Err(err),
            (Err(None), KindReplace::Refused { status }) => Err(status.into()),
            // Polled again after it completed.
            (Ok(_) | Err(None), _) => {
                Err(Status::internal("SW4RM response future polled after completion").into())
            }
        })
    }
}

/// The call is over: its retry state's box goes back to the thread's free list.
#[inline]
fn end<S>(retry: Option<Retries<S>>) {
    if let Some(retry) = retry {
        retry.end();
    }
}

/// Runs attempts until one ends the call, or the call's deadline does: the response
/// headers, or the call's error (`Some`: `None` is for a future with nothing running).
#[inline]
fn run<S, B>(
    mut step: Pin<&mut Step<S, S::Future>>,
    mut timer: Pin<&mut Timer>,
    record: &mut CallRecord,
    retry: &mut Option<Retries<S>>,
    cx: &mut Context<'_>,
) -> Poll<Result<http::Response<B>, Option<BoxError>>>
where
    S: Service<Request, Response = http::Response<B>> + Clone,
    S::Error: Into<BoxError>,
{
    loop {
        let polled = match step.as_mut().project() {
            StepProj::Attempting { mut attempt } => attempt.as_mut().poll(cx).map(|ended| {
                let expired = attempt.expired();
                judge(ended, expired, record, retry.as_mut())
            }),
            StepProj::Backoff { timer, resume, .. } => {
                match timer.as_mut().poll_until(*resume, cx) {
                    Poll::Ready(()) => {
                        resend(step.as_mut(), record);
                        continue;
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
            StepProj::Hedging { hedges } => match poll_hedges(hedges.as_mut(), record, cx) {
                Poll::Ready(answer) => return Poll::Ready(answer),
                Poll::Pending => Poll::Pending,
            },
        };
        let verdict = match polled {
            Poll::Ready(Ok(response)) => return Poll::Ready(Ok(response)),
            Poll::Ready(Err(verdict)) => verdict,
            Poll::Pending => ready!(alarm(step.as_ref(), timer.as_mut(), record, retry, cx)),
        };
        match verdict {
            Verdict::Fail(err) => return Poll::Ready(Err(Some(err))),
            Verdict::Retry(retry) => {
                record.retried(retry.attempt, retry.backoff, retry.reason);
                step.set(Step::Backoff {
                    timer: Box::pin(Timer::new()),
                    resume: retry.resume,
                    resend: retry.resend,
                });
            }
        }
    }
}

/// The backoff is over: the next attempt, made when the retry was decided, is sent.
fn resend<S, F>(mut step: Pin<&mut Step<S, F>>, record: &mut CallRecord) {
    if let StepReplace::Backoff { resend, .. } = step.as_mut().project_replace(Step::Attempting {
        attempt: Attempt::none(),
    }) {
        let started = resend.start(Instant::now());
        record.attempt(started.attempt, started.cap);
        step.set(Step::Attempting {
            attempt: Attempt::new(started.svc, started.request, started.until),
        });
    }
}

/// While an attempt or a backoff waits: the call's one timer, at the earlier of the
/// attempt's own timeout and the call's first deadline (the attempt's on a tie).
#[inline]
fn alarm<S: Clone, F>(
    step: Pin<&Step<S, F>>,
    timer: Pin<&mut Timer>,
    record: &mut CallRecord,
    retry: &mut Option<Retries<S>>,
    cx: &mut Context<'_>,
) -> Poll<Verdict<S>> {
    let attempt = match step.project_ref() {
        StepRef::Attempting { attempt } => attempt.until().map(|at| Due {
            at,
            phase: Phase::Attempt,
        }),
        // A hedged call's attempts run under the call's deadline only.
        StepRef::Backoff { .. } | StepRef::Hedging { .. } => None,
    };
    let due = match (attempt, record.next_due(Progress::default())) {
        (Some(attempt), Some(call)) if call.at < attempt.at => call,
        (Some(attempt), _) => attempt,
        (None, Some(call)) => call,
        (None, None) => return Poll::Pending,
    };
    ready!(timer.poll_until(due.at, cx));
    Poll::Ready(match due.phase {
        Phase::Attempt => attempt_timed_out(record, retry.as_mut()),
        phase => Verdict::Fail(record.timed_out(phase, 0, DetectedBy::Client).into()),
    })
}

#[cfg(test)]
mod tests {
    use std::mem::size_of;

    use super::*;

    type Channel = tonic::transport::Channel;
    type ChannelFuture = <Channel as Service<Request>>::Future;

    /// Every call in flight holds its response future (a call that may be retried
    /// holds its retry state's box too, bounded in `retry/state.rs`): within these
    /// sizes a call holds at most 1 KiB more than a plain tonic call
    /// (`benches/hostile.rs` measures it). It is 360 bytes with the locked
    /// dependencies; the bound leaves 16 bytes for another compiler's layout, not for
    /// a new field, which must make room for itself.
    #[test]
    fn a_calls_future_stays_within_its_budget() {
        let future = size_of::<ResponseFuture<Channel, ChannelFuture>>();
        assert!(future <= 360 + 16, "response future: {future} bytes");
    }
}
