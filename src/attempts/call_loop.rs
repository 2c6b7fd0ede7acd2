//! [`CallLoop`]: carrying out one call's attempts until it has its response headers or
//! its error. The call's first timer runs from the moment the RPC is called; under it
//! the loop runs attempts (`attempt.rs`) one after another, with a backoff between
//! two, or a hedged call's concurrent attempts (`hedges.rs`). The first attempt is
//! sent through the layer's own handle on the inner service when it is ready at once;
//! later ones through handles taken from the spare (`replay/handle.rs`). What each
//! attempt's end means is `verdict.rs` (`hedge_verdict.rs` for hedges); what
//! happens is reported to the call's [`Sink`]: every call of the layer, whichever
//! record it reports to, runs through this one loop.

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use pin_project_lite::pin_project;
use tokio::time::Instant;
use tonic::Status;
use tower_service::Service;

use super::attempt::Attempt;
use super::attempt::Timer;
use super::event::{CallEnd, Event, Run, Sink};
use super::hedge_verdict::poll_hedges;
use super::hedges::{HedgeContext, HedgePlan, Hedges};
use super::replay::{ReplayRequest, Spare};
use super::retries::{Resend, Retries, Retry};
use super::verdict::{attempt_timed_out, judge, timed_out, Verdict};
use crate::policy::cancel::CancelReason;
use crate::policy::deadline::{Due, Phase, Received};
use crate::wire::details::DetectedBy;
use crate::wire::error::BoxError;

type Request = http::Request<tonic::body::Body>;

pin_project! {
    /// The attempts of one call in flight.
    #[derive(Debug)]
    pub(crate) struct CallLoop<S, F> {
        #[pin]
        step: Step<S, F>,
        // Retries inside the deadline, with the spare their handles on the inner
        // service come from; `None` for a call sent once. Ended (its box given back)
        // when the call is.
        retry: Option<Retries<S>>,
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
        // Nothing in flight: the call is over, or was refused before it was sent
        // (`refused`, until it is reported).
        Over { refused: Option<Status> },
    }
}

impl<S, F> CallLoop<S, F> {
    /// A call whose `first` attempt is under way (sent by the layer's `call` through
    /// its own handle on the inner service, [`Attempt::start`], under the first
    /// attempt's timeout of `retry`); `retry` carries its retries, and the spare their
    /// handles come from.
    #[inline(always)]
    pub(crate) fn start(first: Attempt<S, F>, retry: Option<Retries<S>>) -> Self {
        CallLoop {
            step: Step::Attempting { attempt: first },
            retry,
        }
    }

    /// A hedged call: its first attempt sends `request` through `inner` as
    /// [`CallLoop::start`] does; the hedges after it are made from what `hedging` kept
    /// and sent through handles taken from `spare`.
    pub(crate) fn hedged(
        inner: &mut S,
        spare: Spare<S>,
        request: Request,
        hedging: (ReplayRequest, HedgePlan, HedgeContext),
    ) -> Self
    where
        S: Service<Request, Future = F> + Clone,
        S::Error: Into<BoxError>,
    {
        let first = Attempt::start(inner, request, None);
        CallLoop {
            step: Step::Hedging {
                hedges: Box::pin(Hedges::new(spare, first, hedging)),
            },
            retry: None,
        }
    }

    /// A call refused before it was sent: nothing to carry out, `status` to report.
    pub(crate) fn refused(status: Status) -> Self {
        CallLoop {
            step: Step::Over {
                refused: Some(status),
            },
            retry: None,
        }
    }

    /// The call is over: its retry state's box goes back to the thread's free list,
    /// and the attempt in flight, if any, is dropped in place, and with it the inner
    /// call: hyper resets the HTTP/2 stream, and the server sees the cancel.
    #[inline]
    pub(crate) fn finish(self: Pin<&mut Self>) {
        let mut this = self.project();
        if let Some(retry) = this.retry.take() {
            retry.end();
        }
        this.step.set(Step::Over { refused: None });
    }

    /// Why the call was refused before it was sent, once; after that, that it is over
    /// (a future polled after it completed).
    #[cold]
    pub(crate) fn refusal(self: Pin<&mut Self>) -> Status {
        match self.project().step.project() {
            StepProj::Over { refused } => refused.take(),
            _ => None,
        }
        .unwrap_or_else(over)
    }
}

/// What a call that is over answers when polled again.
#[cold]
fn over() -> Status {
    Status::internal("SW4RM response future polled after completion")
}

impl<S, B> CallLoop<S, S::Future>
where
    S: Service<Request, Response = http::Response<B>> + Clone,
    S::Error: Into<BoxError>,
{
    /// Runs attempts until one ends the call, or the call's deadline does: the response
    /// headers, or the call's error. `timer` is the call's one timer while it waits for
    /// response headers (the earlier of its first deadline, a stream's initial or total
    /// timer, and the attempt's own timeout), armed at the first wait; the caller keeps
    /// it (the layer, in the call record's box) and disarms it when the call is over.
    #[inline(always)]
    pub(crate) fn poll<R: Sink>(
        self: Pin<&mut Self>,
        timer: Pin<&mut Timer>,
        call: &mut Run<'_, R>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<http::Response<B>, BoxError>> {
        let this = self.project();
        run(this.step, timer, call, this.retry, cx)
    }
}

/// Runs attempts until one ends the call, or the call's deadline does.
#[inline(always)]
fn run<S, B, R: Sink>(
    mut step: Pin<&mut Step<S, S::Future>>,
    mut timer: Pin<&mut Timer>,
    call: &mut Run<'_, R>,
    retry: &mut Option<Retries<S>>,
    cx: &mut Context<'_>,
) -> Poll<Result<http::Response<B>, BoxError>>
where
    S: Service<Request, Response = http::Response<B>> + Clone,
    S::Error: Into<BoxError>,
{
    loop {
        let polled = match step.as_mut().project() {
            StepProj::Attempting { mut attempt } => attempt
                .as_mut()
                .poll(cx)
                .map(|ended| judge(ended, attempt.until(), call, retry.as_mut())),
            StepProj::Backoff { timer, resume, .. } => {
                match timer.as_mut().poll_until(*resume, cx) {
                    Poll::Ready(()) => {
                        resend(step.as_mut(), call);
                        continue;
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
            StepProj::Hedging { hedges } => match poll_hedges(hedges.as_mut(), call, cx) {
                Poll::Ready(answer) => return Poll::Ready(answer),
                // The call's deadline (the alarm below) still ends every attempt.
                Poll::Pending => Poll::Pending,
            },
            StepProj::Over { .. } => return Poll::Ready(Err(over().into())),
        };
        let verdict = match polled {
            Poll::Ready(Ok(response)) => return Poll::Ready(Ok(response)),
            Poll::Ready(Err(verdict)) => verdict,
            Poll::Pending => ready!(alarm(step.as_ref(), timer.as_mut(), call, retry, cx)),
        };
        match verdict {
            Verdict::Fail(err) => return Poll::Ready(Err(err)),
            Verdict::Retry(retry) => step.set(backoff(retry, call)),
        }
    }
}

/// The retry the rules decided, reported: the backoff before its attempt.
fn backoff<S, F, R: Sink>(retry: Retry<S>, call: &mut Run<'_, R>) -> Step<S, F> {
    call.on(Event::Retried {
        attempt: retry.attempt,
        backoff: retry.backoff,
        reason: retry.reason,
        status: retry.status,
    });
    Step::Backoff {
        timer: Box::pin(Timer::new()),
        resume: retry.resume,
        resend: retry.resend,
    }
}

/// The backoff is over: the next attempt, made when the retry was decided, is sent.
fn resend<S, F, R: Sink>(mut step: Pin<&mut Step<S, F>>, call: &mut Run<'_, R>) {
    if let StepReplace::Backoff { resend, .. } = step.as_mut().project_replace(Step::Attempting {
        attempt: Attempt::none(),
    }) {
        let started = resend.start(Instant::now());
        call.on(Event::Attempt {
            attempt: started.attempt,
            cap: started.cap,
        });
        step.set(Step::Attempting {
            attempt: Attempt::new(started.svc, started.request, started.until),
        });
    }
}

/// While an attempt or a backoff waits: the scope's cancel, and the call's one timer,
/// at the earlier of the attempt's own timeout and the call's first deadline (the
/// attempt's on a tie).
#[inline]
fn alarm<S: Clone, F, R: Sink>(
    step: Pin<&Step<S, F>>,
    timer: Pin<&mut Timer>,
    call: &mut Run<'_, R>,
    retry: &mut Option<Retries<S>>,
    cx: &mut Context<'_>,
) -> Poll<Verdict<S>> {
    let attempt = match step.project_ref() {
        StepRef::Attempting { attempt } => attempt.until().map(|at| Due {
            at,
            phase: Phase::Attempt,
        }),
        // A hedged call's attempts run under the call's deadline only.
        StepRef::Backoff { .. } | StepRef::Hedging { .. } | StepRef::Over { .. } => None,
    };
    // The scope's cancel ends every attempt as the deadline does.
    if let Poll::Ready(reason) = call.poll_cancel(cx) {
        return Poll::Ready(cancelled(reason, call));
    }
    let Some(due) = earliest(attempt, call.first_due()) else {
        return Poll::Pending;
    };
    ready!(timer.poll_until(due.at, cx));
    Poll::Ready(expired(due, call, retry.as_mut()))
}

/// Which of an attempt's own timeout and the call's first deadline fires first (the
/// attempt's on a tie).
#[inline]
fn earliest(attempt: Option<Due<Instant>>, first: Option<Due<Instant>>) -> Option<Due<Instant>> {
    match (attempt, first) {
        (Some(attempt), Some(first)) if first.at < attempt.at => Some(first),
        (Some(attempt), _) => Some(attempt),
        (None, first) => first,
    }
}

/// The caller cancelled (`reason`) while an attempt or a backoff waited: the call's
/// failure.
fn cancelled<S, R: Sink>(reason: CancelReason, call: &mut Run<'_, R>) -> Verdict<S> {
    let seen = Received::default();
    Verdict::Fail(call.end(CallEnd::Cancelled { reason, seen }))
}

/// The timer fired at `due`: the attempt's own timeout (a retry, or the call's
/// timeout in the attempt phase), or the call's deadline.
fn expired<S: Clone, R: Sink>(
    due: Due<Instant>,
    call: &mut Run<'_, R>,
    retry: Option<&mut Retries<S>>,
) -> Verdict<S> {
    match due.phase {
        Phase::Attempt => attempt_timed_out(call, retry),
        phase => Verdict::Fail(timed_out(call, phase, DetectedBy::Client)),
    }
}
