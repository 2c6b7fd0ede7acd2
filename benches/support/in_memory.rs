//! An in-memory inner service and the request a generated client hands the channel,
//! shared by the benches that measure the layer without sockets (`layer`,
//! `instructions`).

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::task::{Context, Poll};

use http_body_util::BodyExt;
use tower::Service;

pub type Request = http::Request<tonic::body::Body>;

/// Answers at once with an empty body; `Answer(true)` ends it with `grpc-status: 0`
/// trailers (a successful call, as the advisor's observations count it).
#[derive(Clone, Copy)]
pub struct Answer(pub bool);

impl Service<Request> for Answer {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request) -> Self::Future {
        let body = match self.0 {
            true => tonic::body::Body::new(OkTrailers(false)),
            false => tonic::body::Body::empty(),
        };
        ready(Ok(http::Response::new(body)))
    }
}

/// An empty response body ending with `grpc-status: 0` trailers: a successful call.
struct OkTrailers(bool);

impl http_body::Body for OkTrailers {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        if std::mem::replace(&mut self.0, true) {
            return Poll::Ready(None);
        }
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        Poll::Ready(Some(Ok(http_body::Frame::trailers(trailers))))
    }

    fn is_end_stream(&self) -> bool {
        self.0
    }
}

/// A request as a generated tonic client hands it to the channel: a POST over HTTP/2
/// to a path, a small message encoded into tonic's 8 KiB buffer, the `GrpcMethod`
/// extension and tonic's headers.
pub fn request(path: &'static str, deadline_by_hand: bool) -> Request {
    let mut buffer = bytes::BytesMut::with_capacity(8 * 1024);
    buffer.extend_from_slice(b"\0\0\0\0\x0a\x0a\x08agent-42");
    let body = http_body_util::Full::new(buffer.split().freeze());
    let mut req = http::Request::new(tonic::body::Body::new(body));
    *req.method_mut() = http::Method::POST;
    *req.version_mut() = http::Version::HTTP_2;
    *req.uri_mut() = http::Uri::from_static(path);
    req.extensions_mut().insert(tonic::GrpcMethod::new(
        "sw4rm.registry.RegistryService",
        "Heartbeat",
    ));
    let h = req.headers_mut();
    h.insert(
        "content-type",
        http::HeaderValue::from_static("application/grpc"),
    );
    h.insert("te", http::HeaderValue::from_static("trailers"));
    if deadline_by_hand {
        h.insert("grpc-timeout", http::HeaderValue::from_static("5000000u"));
    }
    req
}

/// Calls `svc` with `req` and drains the response body.
pub async fn drive<S, B>(svc: &mut S, req: Request)
where
    S: Service<Request, Response = http::Response<B>>,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let response = svc.call(req).await.expect("answer");
    let mut body = std::pin::pin!(response.into_body());
    while let Some(frame) = body.as_mut().frame().await {
        frame.expect("frame");
    }
}
