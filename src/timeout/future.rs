//! [`ResponseFuture`]: the call's first timer runs from the moment the RPC is called.
//! Under it the future waits for the inner service to be ready (tonic's channel
//! buffer may be full, the connection not yet up), calls it, and waits for the
//! response headers; then the call record moves into the [`TimeoutBody`].

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tonic::Status;
use tower_service::Service;

use super::body::TimeoutBody;
use super::record::CallRecord;
use super::BoxError;
use crate::policy::deadline::Progress;
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
    }
}

pin_project! {
    #[project = StateProj]
    #[project_replace = StateReplace]
    #[derive(Debug)]
    enum State<S, F> {
        // Waiting for the inner service to accept a call, as tower's `Oneshot` does.
        Readying { svc: S, request: Request, call: CallRecord },
        // Called: waiting for the response headers.
        Waiting { #[pin] inner: F, call: CallRecord },
        Failed { status: Status },
        Done,
    }
}

impl<S, F> ResponseFuture<S, F> {
    pub(crate) fn new(svc: S, request: Request, call: CallRecord) -> Self {
        ResponseFuture {
            sleep: None,
            state: State::Readying { svc, request, call },
        }
    }

    pub(crate) fn failed(status: Status) -> Self {
        ResponseFuture {
            sleep: None,
            state: State::Failed { status },
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
        loop {
            let step = match state.as_mut().project() {
                StateProj::Readying { svc, call, .. } => match svc.poll_ready(cx) {
                    Poll::Ready(Ok(())) => Step::Call,
                    Poll::Ready(Err(err)) => {
                        call.finish();
                        Step::Fail(err.into())
                    }
                    Poll::Pending => expire(sleep.as_mut(), call, cx),
                },
                StateProj::Waiting { inner, call } => {
                    let first = call.next_due(Progress::default());
                    match inner.poll(cx) {
                        Poll::Ready(Ok(response)) => {
                            if is_server_timeout(response.headers(), first.map(|d| d.0)) {
                                // Trailers-only answer: the server's deadline fired.
                                let phase = call.server_phase(0);
                                Step::Fail(call.timed_out(phase, 0, DetectedBy::Server).into())
                            } else {
                                Step::Response(response)
                            }
                        }
                        Poll::Ready(Err(err)) => {
                            let err: BoxError = err.into();
                            match first {
                                // tonic's own timer on the same deadline won the race.
                                Some((_, phase)) if is_transport_timeout(&*err) => Step::Fail(
                                    call.timed_out(phase, 0, DetectedBy::Transport).into(),
                                ),
                                _ => {
                                    call.finish();
                                    Step::Fail(err)
                                }
                            }
                        }
                        Poll::Pending => expire(sleep.as_mut(), call, cx),
                    }
                }
                StateProj::Failed { .. } | StateProj::Done => Step::FromState,
            };
            match step {
                Step::Pending => return Poll::Pending,
                Step::Call => {
                    if let StateReplace::Readying {
                        mut svc,
                        request,
                        call,
                    } = state.as_mut().project_replace(State::Done)
                    {
                        let inner = svc.call(request);
                        state.set(State::Waiting { inner, call });
                    }
                    continue;
                }
                _ => {}
            }
            // Leaving `Readying` or `Waiting` drops the request or the inner call:
            // hyper resets the HTTP/2 stream, and the server sees the cancel.
            sleep.set(None);
            return match (step, state.project_replace(State::Done)) {
                (Step::Response(response), StateReplace::Waiting { call, .. }) => {
                    let (parts, body) = response.into_parts();
                    Poll::Ready(Ok(http::Response::from_parts(
                        parts,
                        TimeoutBody::new(body, call),
                    )))
                }
                (Step::Fail(err), _) => Poll::Ready(Err(err)),
                (_, StateReplace::Failed { status }) => Poll::Ready(Err(status.into())),
                (_, _) => Poll::Ready(Err(Status::internal(
                    "SW4RM response future polled after completion",
                )
                .into())),
            };
        }
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
