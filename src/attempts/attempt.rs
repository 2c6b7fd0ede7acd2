//! [`Attempt`]: one attempt of a call, as a future: wait for the inner service to be
//! ready (tonic's channel buffer may be full), call it, and wait for the response
//! headers; [`WireTimeout`], the one writer of an attempt's `grpc-timeout`; and
//! [`Timer`], the one timer an attempt's and its call's deadlines are watched by.
//!
//! A call's first attempt is started by [`Attempt::start`] through the layer's own
//! handle on the inner service, when that is ready at once, as a plain tonic call goes
//! through its client's channel. An attempt that has to wait keeps a handle on the
//! inner service and its request, boxed together, so that no call's future carries
//! their size. An attempt after the first takes its handle from the call's spare
//! (`replay/handle.rs`). The attempt's own timeout ([`Attempt::until`]) is
//! watched by the call loop's one timer, which fires for whichever of the attempt's
//! and the call's deadlines comes first (a second timer per call would cost its size
//! in every call's future).
//!
//! [`Timer`]: the one timer every part of a call runs on (the call's deadline, an
//! attempt's timeout, a backoff, a stream's gap). What it waits for is always a
//! [`Due`](crate::policy::deadline::Due) or a plain instant handed to
//! [`Timer::poll_until`]; the timer itself only knows *when*.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll, Waker};
use std::time::Duration;

use http::{HeaderMap, HeaderValue};
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};
use tower_service::Service;

use crate::wire::error::BoxError;
use crate::wire::grpc_timeout::{self, GRPC_TIMEOUT};

type Request = http::Request<tonic::body::Body>;

pin_project! {
    /// One attempt in flight.
    #[derive(Debug)]
    pub(crate) struct Attempt<S, F> {
        #[pin]
        state: State<S, F>,
        // When the attempt's own timeout ends it (`None`: only the call's deadline).
        until: Option<Instant>,
    }
}

pin_project! {
    #[project = StateProj]
    #[project_replace = StateReplace]
    #[derive(Debug)]
    enum State<S, F> {
        // Waiting for the inner service to accept the call, as tower's `Oneshot` does.
        Readying { waiting: Box<(S, Request)> },
        // The inner service failed when asked to accept the call (reported at the
        // first poll).
        Refused { error: Option<BoxError> },
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

impl<S, F> Attempt<S, F> {
    /// An attempt sending `request` through `svc` once it is ready, ended by its own
    /// timeout at `until` if any.
    pub(crate) fn new(svc: S, request: Request, until: Option<Instant>) -> Self {
        Attempt {
            state: State::Readying {
                waiting: Box::new((svc, request)),
            },
            until,
        }
    }

    /// An attempt sending `request` through `inner` now if it is ready now. If not,
    /// the attempt takes `inner`, leaving a clone in its place, and waits for it (a
    /// waker is registered at the first poll).
    #[inline(always)]
    pub(crate) fn start(inner: &mut S, request: Request, until: Option<Instant>) -> Self
    where
        S: Service<Request, Future = F> + Clone,
        S::Error: Into<BoxError>,
    {
        let mut cx = Context::from_waker(Waker::noop());
        let state = match inner.poll_ready(&mut cx) {
            Poll::Ready(Ok(())) => State::Called {
                future: inner.call(request),
            },
            Poll::Ready(Err(err)) => State::Refused {
                error: Some(err.into()),
            },
            Poll::Pending => {
                let svc = std::mem::replace(inner, inner.clone());
                State::Readying {
                    waiting: Box::new((svc, request)),
                }
            }
        };
        Attempt { state, until }
    }

    /// An attempt with nothing to send: the placeholder a call loop leaves while it
    /// makes the next attempt.
    pub(crate) fn none() -> Self {
        Attempt {
            state: State::Handed,
            until: None,
        }
    }

    /// When the attempt's own timeout ends it (`None`: only the call's deadline).
    pub(crate) fn until(&self) -> Option<Instant> {
        self.until
    }

    /// Polls the attempt.
    #[inline]
    pub(crate) fn poll<R>(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Ended<R>>
    where
        S: Service<Request, Response = R, Future = F>,
        S::Error: Into<BoxError>,
        F: Future<Output = Result<R, S::Error>>,
    {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Readying { waiting } => match waiting.0.poll_ready(cx) {
                    Poll::Ready(Ok(())) => {
                        if let StateReplace::Readying { waiting } =
                            state.as_mut().project_replace(State::Handed)
                        {
                            let (mut svc, request) = *waiting;
                            let future = svc.call(request);
                            state.set(State::Called { future });
                        }
                        continue;
                    }
                    Poll::Ready(Err(err)) => return Poll::Ready(Ended::Failed(err.into())),
                    Poll::Pending => return Poll::Pending,
                },
                StateProj::Refused { error } => {
                    let err = error
                        .take()
                        .unwrap_or_else(|| "polled after it ended".into());
                    return Poll::Ready(Ended::Failed(err));
                }
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

// The one writer of an attempt's `grpc-timeout`: the first attempt's as the call plan
// decided it, and each later attempt's (a retry's, a hedge's) as what remains for it,
// once, when it is sent.
/// What to do with a request's `grpc-timeout` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum WireTimeout {
    /// The caller's header already says the deadline: leave it.
    Keep,
    /// Send this value.
    Set(HeaderValue),
    /// No deadline on the wire (infinite calls, unlimited streams).
    Remove,
}

impl WireTimeout {
    /// The header for an attempt under `timeout` (`None`: no deadline on the wire).
    pub(crate) fn of(timeout: Option<Duration>) -> Self {
        match timeout {
            Some(t) => WireTimeout::Set(grpc_timeout::encode_unique(t)),
            None => WireTimeout::Remove,
        }
    }

    /// Writes it into an attempt's headers.
    #[inline]
    pub(crate) fn apply(self, headers: &mut HeaderMap) {
        match self {
            WireTimeout::Keep => {}
            WireTimeout::Set(v) => {
                headers.insert(GRPC_TIMEOUT, v);
            }
            WireTimeout::Remove => {
                headers.remove(GRPC_TIMEOUT);
            }
        }
    }
}

pin_project! {
    /// A timer armed lazily, at the first poll that has to wait: a call answered at
    /// once never creates one (creating and dropping a `Sleep` costs a runtime handle
    /// and the timer driver's lock).
    #[derive(Debug, Default)]
    pub(crate) struct Timer {
        #[pin]
        sleep: Option<Sleep>,
    }
}

impl Timer {
    /// An unarmed timer.
    #[inline]
    pub(crate) fn new() -> Self {
        Timer { sleep: None }
    }

    /// Ready once `at` has passed. `at` may move between polls: earlier re-arms the
    /// timer at once; later is noticed when the timer fires early and re-arms it, so a
    /// deadline pushed back on every message (a stream's gap) costs a clock read per
    /// poll, not timer-driver work.
    pub(crate) fn poll_until(self: Pin<&mut Self>, at: Instant, cx: &mut Context<'_>) -> Poll<()> {
        let mut sleep = self.project().sleep;
        match sleep.as_mut().as_pin_mut() {
            None => sleep.set(Some(tokio::time::sleep_until(at))),
            Some(s) if s.deadline() > at => s.reset(at),
            Some(_) => {}
        }
        let Some(mut s) = sleep.as_pin_mut() else {
            return Poll::Pending;
        };
        loop {
            ready!(s.as_mut().poll(cx));
            if Instant::now() >= at {
                return Poll::Ready(());
            }
            s.as_mut().reset(at);
        }
    }

    /// Disarms the timer (its registration with the driver goes with it).
    #[inline]
    pub(crate) fn clear(self: Pin<&mut Self>) {
        self.project().sleep.set(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::{ready, Ready};
    use std::sync::{Arc, Mutex};

    /// Readiness as the test sets it; records the path of every request it is called
    /// with.
    #[derive(Clone, Default)]
    struct Inner {
        ready: Arc<Mutex<Option<Result<(), &'static str>>>>,
        called: Arc<Mutex<Vec<String>>>,
    }

    impl Service<Request> for Inner {
        type Response = ();
        type Error = BoxError;
        type Future = Ready<Result<(), BoxError>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            match *self.ready.lock().unwrap() {
                None => Poll::Pending,
                Some(r) => Poll::Ready(r.map_err(Into::into)),
            }
        }

        fn call(&mut self, request: Request) -> Self::Future {
            self.called
                .lock()
                .unwrap()
                .push(request.uri().path().to_owned());
            ready(Ok(()))
        }
    }

    fn request() -> Request {
        let mut request = Request::default();
        *request.uri_mut() = http::Uri::from_static("/sw4rm.registry.RegistryService/Heartbeat");
        request
    }

    fn poll(attempt: Pin<&mut Attempt<Inner, Ready<Result<(), BoxError>>>>) -> Poll<Ended<()>> {
        let mut cx = Context::from_waker(Waker::noop());
        attempt.poll(&mut cx)
    }

    #[test]
    fn a_ready_service_is_called_at_the_start() {
        let mut svc = Inner::default();
        *svc.ready.lock().unwrap() = Some(Ok(()));
        let mut attempt = std::pin::pin!(Attempt::start(&mut svc, request(), None));
        assert_eq!(
            svc.called.lock().unwrap().len(),
            1,
            "called before any poll"
        );
        assert!(matches!(
            poll(attempt.as_mut()),
            Poll::Ready(Ended::Answered(()))
        ));
        assert_eq!(svc.called.lock().unwrap().len(), 1, "called once");
    }

    #[test]
    fn a_service_not_ready_yet_gets_the_request_once_it_is() {
        let mut svc = Inner::default();
        let mut attempt = std::pin::pin!(Attempt::start(&mut svc, request(), None));
        assert!(svc.called.lock().unwrap().is_empty());
        assert!(poll(attempt.as_mut()).is_pending());
        *svc.ready.lock().unwrap() = Some(Ok(()));
        assert!(matches!(
            poll(attempt.as_mut()),
            Poll::Ready(Ended::Answered(()))
        ));
        assert_eq!(
            *svc.called.lock().unwrap(),
            ["/sw4rm.registry.RegistryService/Heartbeat"]
        );
    }

    #[test]
    fn a_service_failing_at_the_start_ends_the_attempt_with_its_error() {
        let mut svc = Inner::default();
        *svc.ready.lock().unwrap() = Some(Err("the channel's worker is gone"));
        let mut attempt = std::pin::pin!(Attempt::start(&mut svc, request(), None));
        match poll(attempt.as_mut()) {
            Poll::Ready(Ended::Failed(err)) => {
                assert_eq!(err.to_string(), "the channel's worker is gone")
            }
            other => panic!("{other:?}"),
        }
        assert!(svc.called.lock().unwrap().is_empty());
    }
}

#[cfg(test)]
mod wire_timeout_tests {
    use super::*;

    #[test]
    fn each_choice_writes_what_it_says() {
        let mut headers = HeaderMap::new();
        headers.insert(GRPC_TIMEOUT, HeaderValue::from_static("9S"));
        WireTimeout::Keep.apply(&mut headers);
        assert_eq!(headers[GRPC_TIMEOUT], "9S");
        WireTimeout::of(Some(Duration::from_millis(1_500))).apply(&mut headers);
        assert_eq!(headers[GRPC_TIMEOUT], "1500000u");
        assert!(
            headers[GRPC_TIMEOUT].is_sensitive(),
            "unique to the call: never indexed"
        );
        WireTimeout::of(None).apply(&mut headers);
        assert!(headers.get(GRPC_TIMEOUT).is_none());
    }
}

#[cfg(test)]
mod timer_tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn fires_at_the_instant_even_when_it_moves() {
        let start = Instant::now();
        let mut timer = std::pin::pin!(Timer::new());
        // Moved later after arming: fires at the later instant, not the first.
        let first = start + Duration::from_millis(100);
        let later = start + Duration::from_millis(250);
        std::future::poll_fn(|cx| {
            assert!(timer.as_mut().poll_until(first, cx).is_pending());
            Poll::Ready(())
        })
        .await;
        std::future::poll_fn(|cx| timer.as_mut().poll_until(later, cx)).await;
        assert_eq!(start.elapsed(), Duration::from_millis(250));
        // Moved earlier: fires at the earlier instant.
        let soon = Instant::now() + Duration::from_millis(40);
        std::future::poll_fn(|cx| {
            assert!(timer
                .as_mut()
                .poll_until(soon + Duration::from_secs(9), cx)
                .is_pending());
            Poll::Ready(())
        })
        .await;
        std::future::poll_fn(|cx| timer.as_mut().poll_until(soon, cx)).await;
        assert_eq!(start.elapsed(), Duration::from_millis(290));
        timer.as_mut().clear();
        assert!(timer.sleep.is_none());
    }
}
