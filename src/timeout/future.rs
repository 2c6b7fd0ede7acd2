//! [`ResponseFuture`]: the layer's future for one call. It holds the call's record and
//! the engine's `CallLoop` (`crate::attempts`), which carries out the attempts and
//! reports to the record; when the response headers arrive the record moves into the
//! [`TimeoutBody`].

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use pin_project_lite::pin_project;
use tonic::Status;
use tower_service::Service;

use super::body::TimeoutBody;
use super::record::CallRecord;
use crate::attempts::{Attempt, CallLoop, HedgeContext, HedgePlan, Kept, Retries, Run, Spare};
use crate::wire::error::BoxError;

type Request = http::Request<tonic::body::Body>;

pin_project! {
    /// Response future of [`super::TimeoutProfileService`].
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<S, F> {
        // The call's attempts: over (nothing in flight) once the call is answered or
        // failed, or from the start when it was refused before it was sent.
        #[pin]
        attempts: CallLoop<S, F>,
        // The call's record while the call is in flight; it moves into the response
        // body with the answer. Taken from here rather than by replacing the whole
        // future: the record is the largest part, and every copy costs.
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
        hedging: (Kept, HedgePlan, HedgeContext),
        record: CallRecord,
    ) -> Self
    where
        S: Service<Request, Future = F> + Clone,
        S::Error: Into<BoxError>,
    {
        let attempts = {
            let _span = record.entered();
            CallLoop::hedged(inner, spare, request, hedging)
        };
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
        let mut this = self.project();
        let Some(record) = this.record.as_mut() else {
            // Refused before it was sent, or polled after it completed.
            return Poll::Ready(Err(this.attempts.refusal().into()));
        };
        let (mut timer, call) = record.parts();
        let answered = {
            let _span = call.entered();
            let deadlines = call.deadlines();
            let run = &mut Run::new(call, deadlines);
            ready!(this.attempts.as_mut().poll(timer.as_mut(), run, cx))
        };
        if let Ok(response) = &answered {
            call.answered(response.headers());
        }
        // The call is over: the attempt in flight, if any, is dropped here, and the
        // timer disarmed; the record moves into the body, or ends with the error.
        this.attempts.as_mut().finish();
        timer.clear();
        Poll::Ready(match (answered, this.record.take()) {
            (Ok(response), Some(record)) => Ok(response.map(|body| TimeoutBody::new(body, record))),
            (Err(err), _) => Err(err),
            (Ok(_), None) => Err(this.attempts.refusal().into()),
        })
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
