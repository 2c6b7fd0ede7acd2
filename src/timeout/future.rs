//! [`ResponseFuture`]: the inner call raced against the first deadline, until the
//! response headers arrive.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tonic::Status;

use super::body::TimeoutBody;
use super::call::{is_server_timeout, is_transport_timeout, CallContext};
use super::BoxError;
use crate::details::{DetectedBy, Phase};

pin_project! {
    /// Response future of [`super::TimeoutProfileService`].
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    #[derive(Debug)]
    enum State<F> {
        Waiting {
            #[pin]
            inner: F,
            #[pin]
            sleep: Option<Sleep>,
            call: Option<CallContext>,
            phase: Phase,
            configured: Duration,
        },
        Failed { status: Option<Status> },
    }
}

impl<F> ResponseFuture<F> {
    pub(crate) fn new(inner: F, call: CallContext, first: Option<(Duration, Phase)>) -> Self {
        let (configured, phase) = first.unwrap_or((Duration::ZERO, Phase::Total));
        let sleep = first.map(|(d, _)| tokio::time::sleep_until(call.start + d));
        ResponseFuture {
            state: State::Waiting {
                inner,
                sleep,
                call: Some(call),
                phase,
                configured,
            },
        }
    }

    pub(crate) fn failed(status: Status) -> Self {
        ResponseFuture {
            state: State::Failed {
                status: Some(status),
            },
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<http::Response<B>, E>>,
    E: Into<BoxError>,
    B: http_body::Body,
{
    type Output = Result<http::Response<TimeoutBody<B>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        let outcome = match state.as_mut().project() {
            StateProj::Failed { status } => {
                let status = status
                    .take()
                    .unwrap_or_else(|| Status::internal("response future polled after completion"));
                return Poll::Ready(Err(status.into()));
            }
            StateProj::Waiting {
                inner,
                sleep,
                call,
                phase,
                configured,
            } => {
                let Some(ctx) = call.as_mut() else {
                    return Poll::Ready(Err(Status::internal(
                        "response future polled after completion",
                    )
                    .into()));
                };
                match inner.poll(cx) {
                    Poll::Ready(Ok(response)) => {
                        let mut ctx = call.take();
                        let deadline = sleep.as_ref().get_ref().as_ref().map(|s| s.deadline());
                        if is_server_timeout(response.headers(), deadline) {
                            // Trailers-only answer: the server's deadline fired.
                            let status = ctx.as_mut().map(|c| {
                                let messages = c.streaming.then_some(0);
                                c.timed_out(*phase, *configured, messages, DetectedBy::Server)
                            });
                            Err(status
                                .unwrap_or_else(|| Status::deadline_exceeded("deadline exceeded")))
                        } else {
                            let (parts, body) = response.into_parts();
                            return Poll::Ready(Ok(http::Response::from_parts(
                                parts,
                                TimeoutBody::new(body, ctx),
                            )));
                        }
                    }
                    Poll::Ready(Err(err)) => {
                        let err: BoxError = err.into();
                        if is_transport_timeout(&*err) {
                            // tonic's own timer on the same deadline won the race.
                            let messages = ctx.streaming.then_some(0);
                            Err(ctx.timed_out(*phase, *configured, messages, DetectedBy::Transport))
                        } else {
                            ctx.complete();
                            return Poll::Ready(Err(err));
                        }
                    }
                    Poll::Pending => {
                        let Some(sleep) = sleep.as_pin_mut() else {
                            return Poll::Pending;
                        };
                        ready!(sleep.poll(cx));
                        let messages = ctx.streaming.then_some(0);
                        Err(ctx.timed_out(*phase, *configured, messages, DetectedBy::Client))
                    }
                }
            }
        };
        // Drop the inner call now: hyper resets the HTTP/2 stream, the server sees the cancel.
        state.set(State::Failed { status: None });
        Poll::Ready(outcome.map_err(Into::into))
    }
}
