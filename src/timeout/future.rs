//! [`ResponseFuture`]: the layer's future for one call. It holds the call's record and
//! the engine's [`CallLoop`] (`crate::attempts`), which carries out the attempts and
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
use crate::attempts::{CallLoop, HedgeContext, HedgePlan, Kept, Retries, Spare};
use crate::wire::error::BoxError;

type Request = http::Request<tonic::body::Body>;

pin_project! {
    /// Response future of [`super::TimeoutProfileService`].
    #[derive(Debug)]
    pub struct ResponseFuture<S, F> {
        #[pin]
        kind: Kind<S, F>,
    }
}

pin_project! {
    #[project = KindProj]
    #[project_replace = KindReplace]
    #[derive(Debug)]
    enum Kind<S, F> {
        // The call in flight.
        Calling {
            #[pin]
            attempts: CallLoop<S, F>,
            record: CallRecord,
        },
        // Refused before it was sent (not a gRPC path, a malformed header, nothing
        // left of the deadline, a delegation refused).
        Refused { status: Status },
        // Answered, failed, or refused and reported.
        Over,
    }
}

impl<S, F> ResponseFuture<S, F> {
    /// A call whose first attempt sends `request` through `inner`, the layer's own
    /// handle on the inner service (see [`CallLoop::start`]); `retry` carries its
    /// retries, and the spare their handles come from.
    #[inline(always)]
    pub(crate) fn start(
        inner: &mut S,
        request: Request,
        record: CallRecord,
        retry: Option<Retries<S>>,
    ) -> Self
    where
        S: Service<Request, Future = F> + Clone,
        S::Error: Into<BoxError>,
    {
        let attempts = {
            let _span = record.entered();
            CallLoop::start(inner, request, record.start(), retry)
        };
        ResponseFuture {
            kind: Kind::Calling { attempts, record },
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
            kind: Kind::Calling { attempts, record },
        }
    }

    /// A call refused before it was sent.
    pub(crate) fn failed(status: Status) -> Self {
        ResponseFuture {
            kind: Kind::Refused { status },
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
        let mut kind = self.project().kind;
        let answered = match kind.as_mut().project() {
            KindProj::Calling {
                mut attempts,
                record,
            } => {
                let _span = record.entered();
                let answered = ready!(attempts.as_mut().poll(record, cx));
                attempts.finish();
                Some(answered)
            }
            KindProj::Refused { .. } | KindProj::Over => None,
        };
        // The call is over: the attempt in flight, if any, is dropped with the loop.
        let over = kind.project_replace(Kind::Over);
        Poll::Ready(match (answered, over) {
            (Some(Ok(response)), KindReplace::Calling { mut record, .. }) => {
                let (parts, body) = response.into_parts();
                record.answered(&parts.headers);
                Ok(http::Response::from_parts(
                    parts,
                    TimeoutBody::new(body, record),
                ))
            }
            (Some(Err(err)), _) => Err(err),
            (None, KindReplace::Refused { status }) => Err(status.into()),
            // Polled again after it completed.
            (Some(Ok(_)) | None, _) => {
                Err(Status::internal("SW4RM response future polled after completion").into())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::mem::size_of;

    use super::*;

    type Channel = tonic::transport::Channel;
    type ChannelFuture = <Channel as Service<Request>>::Future;

    /// Every call in flight holds its response future (a call that may be retried
    /// holds its retry state's box too, bounded in `attempts/retries.rs`): within these
    /// sizes a call holds at most 1 KiB more than a plain tonic call
    /// (`benches/hostile.rs` measures it). It is 360 bytes with the locked
    /// dependencies; the bound leaves 16 bytes for another compiler's layout, not for
    /// a new field, which must make room for itself.
    #[test]
    fn a_calls_future_stays_within_its_budget() {
        let future = size_of::<ResponseFuture<Channel, ChannelFuture>>();
        assert!(future <= 360 + 16, "response future: {future} bytes");
    }
}
