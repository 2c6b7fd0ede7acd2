//! [`Attempt`]: one attempt of a call, as a future: wait for the inner service to be
//! ready (tonic's channel buffer may be full, the connection not yet up), call it, and
//! wait for the response headers. The inner service is lent by the call loop for each
//! poll: the loop alone owns it. The attempt's own timeout ([`Attempt::until`]) is
//! watched by the loop's one timer, which fires for whichever of the attempt's and the
//! call's deadlines comes first (a second timer per call would cost its size in every
//! call's future).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tokio::time::Instant;
use tower_service::Service;

use crate::timeout::BoxError;

type Request = http::Request<tonic::body::Body>;

pin_project! {
    /// One attempt in flight.
    #[derive(Debug)]
    pub(crate) struct Attempt<F> {
        #[pin]
        state: State<F>,
        // When the attempt's own timeout ends it (`None`: only the call's deadline).
        until: Option<Instant>,
    }
}

pin_project! {
    #[project = StateProj]
    #[project_replace = StateReplace]
    #[derive(Debug)]
    enum State<F> {
        // Waiting for the inner service to accept the call, as tower's `Oneshot` does.
        Readying { request: Request },
        // Handed to the inner service, whose `call` has not returned: seen only if
        // that `call` panicked and the caller polls again.
        Handed,
        // Called: waiting for the response headers.
        Called { #[pin] future: F },
    }
}

/// How an attempt ended.
#[derive(Debug)]
pub(crate) enum Ended<R> {
    /// Response headers arrived (a trailers-only gRPC error among them).
    Answered(R),
    /// The inner service failed (before or after sending).
    Failed(BoxError),
}

impl<F> Attempt<F> {
    /// An attempt sending `request`, ended by its own timeout at `until` if any.
    #[inline(always)]
    pub(crate) fn new(request: Request, until: Option<Instant>) -> Self {
        Attempt {
            state: State::Readying { request },
            until,
        }
    }

    /// When the attempt's own timeout ends it (`None`: only the call's deadline).
    pub(crate) fn until(&self) -> Option<Instant> {
        self.until
    }

    /// Whether the attempt's own timeout has passed: an ending that arrives now (the
    /// server's or tonic's timer on the same instant) is the attempt's timeout.
    pub(crate) fn expired(&self) -> bool {
        self.until.is_some_and(|until| Instant::now() >= until)
    }

    /// Polls the attempt with the call loop's service.
    #[inline]
    pub(crate) fn poll<S, R>(
        self: Pin<&mut Self>,
        svc: &mut S,
        cx: &mut Context<'_>,
    ) -> Poll<Ended<R>>
    where
        S: Service<Request, Response = R, Future = F>,
        S::Error: Into<BoxError>,
        F: Future<Output = Result<R, S::Error>>,
    {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Readying { .. } => match svc.poll_ready(cx) {
                    Poll::Ready(Ok(())) => {
                        if let StateReplace::Readying { request } =
                            state.as_mut().project_replace(State::Handed)
                        {
                            let future = svc.call(request);
                            state.set(State::Called { future });
                        }
                        continue;
                    }
                    Poll::Ready(Err(err)) => return Poll::Ready(Ended::Failed(err.into())),
                    Poll::Pending => return Poll::Pending,
                },
                StateProj::Handed => {
                    let err = "the inner service panicked while called";
                    return Poll::Ready(Ended::Failed(err.into()));
                }
                StateProj::Called { future } => {
                    return match future.poll(cx) {
                        Poll::Ready(Ok(response)) => Poll::Ready(Ended::Answered(response)),
                        Poll::Ready(Err(err)) => Poll::Ready(Ended::Failed(err.into())),
                        Poll::Pending => Poll::Pending,
                    }
                }
            }
        }
    }
}
