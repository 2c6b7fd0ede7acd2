//! [`ResponseFuture`]: the call's first timer runs from the moment the RPC is called.
//! Under it the future waits for the inner service to be ready (tonic's channel
//! buffer may be full, the connection not yet up), calls it, and waits for the
//! response headers; then the call record moves into the [`TimeoutBody`].

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};
use tonic::Status;
use tower_service::Service;

use super::body::TimeoutBody;
use super::record::CallRecord;
use super::retry::{
    classify_error, classify_response, Retry, CANCELLED, DEADLINE_EXCEEDED, UNAVAILABLE,
};
use super::BoxError;
use crate::policy::deadline::{Phase, Progress};
use crate::policy::retry::{Failure, Pushback};
use crate::wire::details::DetectedBy;
use crate::wire::status::{is_server_timeout, is_transport_timeout};

type Request = http::Request<tonic::body::Body>;

pin_project! {
    /// Response future of [`super::TimeoutProfileService`].
    #[derive(Debug)]
    pub struct ResponseFuture<S, F> {
        // The first timer (the earlier of a stream's initial and total timers), armed
        // at the first `Pending`: a call answered at once needs no timer, and creating
        // and dropping one costs a runtime handle and the timer driver's lock.
        #[pin]
        sleep: Option<Sleep>,
        #[pin]
        state: State<S, F>,
        // The call's record, beside the state so that state changes do not move it:
        // `None` for a call failed before it was planned, and once it moved into the
        // response body (or ended).
        call: Option<CallRecord>,
        // Retries inside the deadline; `None` for a call sent once.
        retry: Option<Box<Retry<S>>>,
    }
}

pin_project! {
    #[project = StateProj]
    #[project_replace = StateReplace]
    #[derive(Debug)]
    enum State<S, F> {
        // Waiting for the inner service to accept a call, as tower's `Oneshot` does.
        Readying { svc: S, request: Request },
        // Called: waiting for the response headers.
        Waiting { #[pin] inner: F },
        // Between two attempts of a retried call.
        Backoff,
        Failed { status: Status },
        Done,
    }
}

impl<S, F> ResponseFuture<S, F> {
    pub(crate) fn new(
        svc: S,
        request: Request,
        call: CallRecord,
        retry: Option<Box<Retry<S>>>,
    ) -> Self {
        ResponseFuture {
            sleep: None,
            state: State::Readying { svc, request },
            call: Some(call),
            retry,
        }
    }

    pub(crate) fn failed(status: Status) -> Self {
        ResponseFuture {
            sleep: None,
            state: State::Failed { status },
            call: None,
            retry: None,
        }
    }
}

/// What this poll decided, before the state changes.
enum Step<B> {
    /// Nothing yet: the state stays.
    Pending,
    /// The inner service is ready: call it.
    Call,
    /// Headers arrived: the record moves into the body.
    Response(http::Response<B>),
    /// The call ended with this error.
    Fail(BoxError),
    /// The attempt failed and another follows after this backoff.
    Retry(Duration, &'static str),
    /// The backoff is over: send the next attempt.
    Resend,
    /// Not in flight: answer from the state itself (a planned failure, or done).
    FromState,
}

impl<S, B> Future for ResponseFuture<S, S::Future>
where
    S: Service<Request, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    B: http_body::Body,
{
    type Output = Result<http::Response<TimeoutBody<B>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut sleep = this.sleep;
        let mut state = this.state;
        let slot = this.call;
        let retry = this.retry;
        let _span = slot.as_ref().and_then(CallRecord::entered);
        loop {
            let step = match (state.as_mut().project(), slot.as_mut()) {
                (StateProj::Failed { .. } | StateProj::Done, _) | (_, None) => Step::FromState,
                (StateProj::Readying { svc, .. }, Some(call)) => match svc.poll_ready(cx) {
                    Poll::Ready(Ok(())) => Step::Call,
                    Poll::Ready(Err(err)) => failed_attempt(retry, call, err.into()),
                    Poll::Pending => match attempt_expired(retry, call, cx) {
                        Some(step) => step,
                        None => expire(sleep.as_mut(), call, cx),
                    },
                },
                (StateProj::Waiting { inner }, Some(call)) => {
                    // The first timer, asked for only where an ending needs it.
                    let first = |call: &CallRecord| call.next_due(Progress::default());
                    match inner.poll(cx) {
                        Poll::Ready(Ok(response)) => {
                            if is_server_timeout(response.headers(), || first(call).map(|d| d.0)) {
                                // Trailers-only answer: the server's deadline fired.
                                let phase = call.server_phase(0);
                                Step::Fail(call.timed_out(phase, 0, DetectedBy::Server).into())
                            } else {
                                answered(retry, call, response)
                            }
                        }
                        Poll::Ready(Err(err)) => {
                            let err: BoxError = err.into();
                            // tonic's timer on a retried attempt's own deadline.
                            let attempt = retry.as_ref().is_some_and(|r| r.attempt_expired());
                            let transport = is_transport_timeout(&*err) && !attempt;
                            match first(call) {
                                // tonic's own timer on the same deadline won the race.
                                Some((at, phase)) if transport && Instant::now() >= at => {
                                    Step::Fail(
                                        call.timed_out(phase, 0, DetectedBy::Transport).into(),
                                    )
                                }
                                // A shorter deadline below the layer fired first.
                                _ if transport => Step::Fail(call.transport_capped().into()),
                                _ => failed_attempt(retry, call, err),
                            }
                        }
                        Poll::Pending => match attempt_expired(retry, call, cx) {
                            Some(step) => step,
                            None => expire(sleep.as_mut(), call, cx),
                        },
                    }
                }
                (StateProj::Backoff, Some(call)) => {
                    match retry.as_mut().map(|r| r.poll_backoff(cx)) {
                        Some(Poll::Ready(())) => Step::Resend,
                        _ => expire(sleep.as_mut(), call, cx),
                    }
                }
            };
            match step {
                Step::Pending => return Poll::Pending,
                Step::Call => {
                    if let StateReplace::Readying { mut svc, request } =
                        state.as_mut().project_replace(State::Done)
                    {
                        let inner = svc.call(request);
                        if let Some(retry) = retry.as_mut() {
                            retry.svc = Some(svc);
                        }
                        state.set(State::Waiting { inner });
                    }
                    continue;
                }
                Step::Retry(backoff, reason) => {
                    // Dropping the attempt resets its HTTP/2 stream.
                    match state.as_mut().project_replace(State::Backoff) {
                        StateReplace::Readying { svc, .. } => {
                            if let Some(retry) = retry.as_mut() {
                                retry.svc = Some(svc);
                            }
                        }
                        StateReplace::Waiting { .. } | StateReplace::Backoff => {}
                        StateReplace::Failed { status } => {
                            state.set(State::Failed { status });
                            continue;
                        }
                        StateReplace::Done => {
                            state.set(State::Done);
                            continue;
                        }
                    }
                    let attempt = retry.as_ref().map_or(1, |r| r.attempt);
                    if let Some(call) = slot.as_ref() {
                        call.retried(attempt, backoff, reason);
                    }
                    continue;
                }
                Step::Resend => {
                    let next = retry.as_mut().and_then(|r| {
                        let svc = r.svc.take()?;
                        let request = r.next_request();
                        if let Some(call) = slot.as_mut() {
                            call.attempt(r.attempt, r.attempt_cap());
                        }
                        Some((svc, request))
                    });
                    match next {
                        Some((svc, request)) => state.set(State::Readying { svc, request }),
                        None => {
                            if let Some(mut call) = slot.take() {
                                call.finish(|| tonic::Code::Internal);
                            }
                            state.set(State::Failed {
                                status: Status::internal("SW4RM retry without a service"),
                            });
                        }
                    }
                    continue;
                }
                _ => {}
            }
            // Leaving `Readying` or `Waiting` drops the request or the inner call:
            // hyper resets the HTTP/2 stream, and the server sees the cancel.
            sleep.set(None);
            return match (step, state.project_replace(State::Done)) {
                (Step::Response(response), StateReplace::Waiting { .. }) => match slot.take() {
                    Some(mut call) => {
                        let (parts, body) = response.into_parts();
                        call.answered(&parts.headers);
                        Poll::Ready(Ok(http::Response::from_parts(
                            parts,
                            TimeoutBody::new(body, call),
                        )))
                    }
                    None => Poll::Ready(Err(Status::internal(
                        "SW4RM response without a call record",
                    )
                    .into())),
                },
                (Step::Fail(err), _) => {
                    // The record has ended with the failure; drop it now.
                    slot.take();
                    Poll::Ready(Err(err))
                }
                (_, StateReplace::Failed { status }) => Poll::Ready(Err(status.into())),
                (_, _) => Poll::Ready(Err(Status::internal(
                    "SW4RM response future polled after completion",
                )
                .into())),
            };
        }
    }
}

/// Response headers arrived: a trailers-only error may be retried; anything else is
/// the call's answer.
fn answered<S, B>(
    retry: &mut Option<Box<Retry<S>>>,
    call: &mut CallRecord,
    mut response: http::Response<B>,
) -> Step<B> {
    let Some(r) = retry.as_mut() else {
        return Step::Response(response);
    };
    if let Some((failure, pushback)) = classify_response(response.headers()) {
        // The server's own deadline for this attempt: the attempt timed out.
        let failure = match failure {
            Failure::Code(DEADLINE_EXCEEDED | CANCELLED) if r.attempt_expired() => {
                Failure::AttemptTimeout
            }
            other => other,
        };
        match r.after_failure(failure, pushback) {
            Ok(backoff) => return Step::Retry(backoff, reason(failure)),
            Err(stop) => call.not_retried(r.attempt, stop.as_str()),
        }
    } else {
        r.answered();
    }
    r.mark(&mut response);
    Step::Response(response)
}

/// The inner service failed: retry when the request never reached the server, or
/// when it may have and the call is idempotent.
fn failed_attempt<S, B>(
    retry: &mut Option<Box<Retry<S>>>,
    call: &mut CallRecord,
    err: BoxError,
) -> Step<B> {
    if let Some(r) = retry.as_mut() {
        let failure = match classify_error(&err) {
            _ if is_transport_timeout(&*err) && r.attempt_expired() => Failure::AttemptTimeout,
            other => other,
        };
        match r.after_failure(failure, Pushback::None) {
            Ok(backoff) => return Step::Retry(backoff, reason(failure)),
            Err(stop) => {
                call.not_retried(r.attempt, stop.as_str());
                if failure == Failure::AttemptTimeout {
                    return Step::Fail(
                        call.timed_out(Phase::Attempt, 0, DetectedBy::Transport)
                            .into(),
                    );
                }
            }
        }
    }
    Step::Fail(call.failed(err))
}

/// The attempt in flight reached its attempt timeout: retry, or end the call with it.
fn attempt_expired<S, B>(
    retry: &mut Option<Box<Retry<S>>>,
    call: &mut CallRecord,
    cx: &mut Context<'_>,
) -> Option<Step<B>> {
    let r = retry.as_mut()?;
    if r.poll_attempt(cx).is_pending() {
        return None;
    }
    Some(
        match r.after_failure(Failure::AttemptTimeout, Pushback::None) {
            Ok(backoff) => Step::Retry(backoff, reason(Failure::AttemptTimeout)),
            Err(stop) => {
                call.not_retried(r.attempt, stop.as_str());
                Step::Fail(call.timed_out(Phase::Attempt, 0, DetectedBy::Client).into())
            }
        },
    )
}

fn reason(failure: Failure) -> &'static str {
    match failure {
        Failure::Code(UNAVAILABLE) => "unavailable",
        Failure::Code(_) => "status",
        Failure::AttemptTimeout => "attempt_timeout",
        Failure::NotSent => "not_sent",
    }
}

/// While the inner service is not ready or has not answered: the first timer.
fn expire<B>(
    sleep: Pin<&mut Option<Sleep>>,
    call: &mut CallRecord,
    cx: &mut Context<'_>,
) -> Step<B> {
    let Some((at, phase)) = call.next_due(Progress::default()) else {
        return Step::Pending;
    };
    let mut sleep = sleep;
    if sleep.is_none() {
        sleep.set(Some(tokio::time::sleep_until(at)));
    }
    let Some(sleep) = sleep.as_pin_mut() else {
        return Step::Pending;
    };
    match sleep.poll(cx) {
        Poll::Ready(()) => Step::Fail(call.timed_out(phase, 0, DetectedBy::Client).into()),
        Poll::Pending => Step::Pending,
    }
}
