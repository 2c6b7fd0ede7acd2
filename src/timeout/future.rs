//! [`ResponseFuture`]: the inner call raced against the first timer, until the
//! response headers arrive; then the call record moves into the [`TimeoutBody`].

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tonic::Status;

use super::body::TimeoutBody;
use super::record::CallRecord;
use super::BoxError;
use crate::policy::deadline::Progress;
use crate::wire::details::DetectedBy;
use crate::wire::status::{is_server_timeout, is_transport_timeout};

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
    #[project_replace = StateReplace]
    #[derive(Debug)]
    enum State<F> {
        Waiting {
            #[pin]
            inner: F,
            #[pin]
            sleep: Option<Sleep>,
            call: CallRecord,
        },
        Failed { status: Status },
        Done,
    }
}

impl<F> ResponseFuture<F> {
    pub(crate) fn new(inner: F, call: CallRecord) -> Self {
        let sleep = call
            .next_due(Progress::default())
            .map(|(at, _)| tokio::time::sleep_until(at));
        ResponseFuture {
            state: State::Waiting { inner, sleep, call },
        }
    }

    pub(crate) fn failed(status: Status) -> Self {
        ResponseFuture {
            state: State::Failed { status },
        }
    }
}

/// What this poll decided, before the state changes.
enum Step<B> {
    /// Nothing yet: the state stays.
    Pending,
    /// Headers arrived: the record moves into the body.
    Response(http::Response<B>),
    /// The call ended with this error.
    Fail(BoxError),
    /// Not waiting: answer from the state itself (a planned failure, or done).
    FromState,
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
        let step = match state.as_mut().project() {
            StateProj::Waiting { inner, sleep, call } => {
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
                            Some((_, phase)) if is_transport_timeout(&*err) => {
                                Step::Fail(call.timed_out(phase, 0, DetectedBy::Transport).into())
                            }
                            _ => {
                                call.finish();
                                Step::Fail(err)
                            }
                        }
                    }
                    Poll::Pending => match (sleep.as_pin_mut(), first) {
                        (Some(sleep), Some((_, phase))) => {
                            ready!(sleep.poll(cx));
                            Step::Fail(call.timed_out(phase, 0, DetectedBy::Client).into())
                        }
                        _ => Step::Pending,
                    },
                }
            }
            StateProj::Failed { .. } | StateProj::Done => Step::FromState,
        };
        if let Step::Pending = step {
            return Poll::Pending;
        }
        // Leaving `Waiting` drops the inner call: hyper resets the HTTP/2 stream, and
        // the server sees the cancel.
        match (step, state.project_replace(State::Done)) {
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
        }
    }
}
