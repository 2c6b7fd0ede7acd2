//! [`Attempt`]: one attempt of a call, as a future: wait for the inner service to be
//! ready (tonic's channel buffer may be full, the connection not yet up), call it, and
//! wait for the response headers, under the attempt's own timer when it has one. The
//! inner service is lent by the call loop for each poll: the loop alone owns it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tokio::time::Instant;
use tower_service::Service;

use crate::timeout::BoxError;
use crate::timer::Timer;

type Request = http::Request<tonic::body::Body>;

pin_project! {
    /// One attempt in flight.
    #[derive(Debug)]
    pub(crate) struct Attempt<F> {
        #[pin]
        state: State<F>,
        #[pin]
        timer: Timer,
        // When the attempt's own timeout ends it (`None`: only the call's deadline).
        until: Option<Instant>,
    }
}

pin_project! {
    #[project = StateProj]
    #[derive(Debug)]
    enum State<F> {
        // Waiting for the inner service to accept the call, as tower's `Oneshot` does.
        Readying { request: Request },
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
    /// The attempt's own timeout passed first.
    TimedOut,
}

impl<F> Attempt<F> {
    /// An attempt sending `request`, ended by its own timeout at `until` if any.
    pub(crate) fn new(request: Request, until: Option<Instant>) -> Self {
        Attempt {
            state: State::Readying { request },
            timer: Timer::new(),
            until,
        }
    }

    /// Whether the attempt's own timeout has passed: an ending that arrives now (the
    /// server's or tonic's timer on the same instant) is the attempt's timeout.
    pub(crate) fn expired(&self) -> bool {
        self.until.is_some_and(|until| Instant::now() >= until)
    }

    /// Polls the attempt with the call loop's service.
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
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Readying { request } => match svc.poll_ready(cx) {
                    Poll::Ready(Ok(())) => {
                        // `Request::default()` is a placeholder that allocates nothing.
                        let future = svc.call(std::mem::take(request));
                        this.state.set(State::Called { future });
                        continue;
                    }
                    Poll::Ready(Err(err)) => return Poll::Ready(Ended::Failed(err.into())),
                    Poll::Pending => break,
                },
                StateProj::Called { future } => match future.poll(cx) {
                    Poll::Ready(Ok(response)) => return Poll::Ready(Ended::Answered(response)),
                    Poll::Ready(Err(err)) => return Poll::Ready(Ended::Failed(err.into())),
                    Poll::Pending => break,
                },
            }
        }
        match *this.until {
            Some(until) => this.timer.poll_until(until, cx).map(|()| Ended::TimedOut),
            None => Poll::Pending,
        }
    }
}
