//! The layer's response future, where tower keeps its own (`tower::timeout::future`):
//! [`ResponseFuture`], one call until its response headers or its error. It holds
//! the engine's `CallLoop` (`crate::attempts`), which carries out the attempts and
//! reports to the call's record (the same loop and the same record for every call);
//! when the response headers arrive the record moves
//! into the response body ([`super::body::TimeoutBody`]).
//!
//! ```
//! use sw4rm_timeouts::timeout::body::TimeoutBody;
//! use sw4rm_timeouts::timeout::future::ResponseFuture;
//! use sw4rm_timeouts::TimeoutProfileService;
//! use tonic::transport::Channel;
//! use tower_service::Service;
//!
//! type Request = http::Request<tonic::body::Body>;
//! type ChannelFuture = <Channel as Service<Request>>::Future;
//!
//! // What a call through the layer over a tonic channel returns, and what it answers.
//! fn call(svc: &mut TimeoutProfileService<Channel>, request: Request)
//!     -> ResponseFuture<Channel, ChannelFuture>
//! {
//!     svc.call(request)
//! }
//! type Answer = http::Response<TimeoutBody<tonic::body::Body>>;
//! let _: Option<<TimeoutProfileService<Channel> as Service<Request>>::Response> =
//!     None::<Answer>;
//! # let _ = call;
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use pin_project_lite::pin_project;
use tonic::Status;
use tower_service::Service;

use super::body::TimeoutBody;
use super::record::CallRecord;
use crate::attempts::{
    Attempt, CallLoop, HedgeContext, HedgePlan, ReplayRequest, Retries, Run, Spare,
};
use crate::wire::error::BoxError;

type Request = http::Request<tonic::body::Body>;

pin_project! {
    /// Response future of [`super::TimeoutProfileService`].
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<S, F> {
        // The engine's attempts: over (nothing in flight) once the call is answered
        // or failed, or from the start when it was refused before it was sent.
        #[pin]
        attempts: CallLoop<S, F>,
        // The call's record while the call is in flight; it moves into the response
        // body with the answer. Taken from here rather than by replacing the whole
        // future: every copy costs.
        record: Option<CallRecord>,
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
            attempts: CallLoop::start(first, retry),
            record: Some(record),
        }
    }

    /// A hedged call: its first attempt sends `request` through `inner` as
    /// [`ResponseFuture::start`] does; the hedges after it are made from what
    /// `hedging` kept and sent through handles taken from `spare`.
    pub(crate) fn hedged(
        inner: &mut S,
        spare: Spare<S>,
        request: Request,
        hedging: (ReplayRequest, HedgePlan, HedgeContext),
        record: CallRecord,
    ) -> Self
    where
        S: Service<Request, Future = F> + Clone,
        S::Error: Into<BoxError>,
    {
        // Sent in the call's span, where the attempts are kept: a closure would move
        // them out.
        let entered = record.span().enter();
        let attempts = CallLoop::hedged(inner, spare, request, hedging);
        drop(entered);
        ResponseFuture {
            attempts,
            record: Some(record),
        }
    }

    /// A call refused before it was sent (not a gRPC path, a malformed header,
    /// nothing left of the deadline, a delegation refused).
    pub(crate) fn failed(status: Status) -> Self {
        ResponseFuture {
            attempts: CallLoop::refused(status),
            record: None,
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
        let this = self.project();
        let mut attempts = this.attempts;
        let kept = this.record;
        let Some(record) = kept.as_mut() else {
            // Refused before it was sent, or polled after it completed.
            return Poll::Ready(Err(attempts.refusal().into()));
        };
        let (mut timer, record) = record.parts();
        let polled = attempts.as_mut();
        let mut answered = ready!(record.in_span_mut(
            #[inline(always)]
            |call| polled.poll(timer.as_mut(), &mut Run::new(call), cx)
        ));
        if let Ok(response) = &mut answered {
            record.answered(response.headers());
            if let Some(under) = record.answered_under() {
                response.extensions_mut().insert(under);
            }
        }
        // The call is over: the attempt in flight, if any, is dropped here, and the
        // timer disarmed; the record moves into the body, or ends with the error.
        attempts.as_mut().finish();
        timer.clear();
        let response = match answered {
            Ok(response) => response,
            Err(err) => return Poll::Ready(Err(err)),
        };
        let Some(record) = kept.take() else {
            return Poll::Ready(Err(attempts.refusal().into()));
        };
        Poll::Ready(Ok(response.map(|body| TimeoutBody::new(body, record))))
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
