//! [`InMemory`]: an inner service without a socket, answering every call at once, and
//! [`generated_request`]: a request as a tonic-generated client hands it to the channel.
//! For measuring what the layer itself adds to a call (allocations, instructions,
//! time), with nothing else in the way: the crate's allocation tests and benchmarks use
//! these, and so can an agent's own.

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::pin::Pin;
use std::task::{Context, Poll};

use tower_service::Service;

type Request = http::Request<tonic::body::Body>;

/// An inner service that answers every call at once, allocating nothing itself beyond
/// the response body it is asked for.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use sw4rm_timeouts::testing::{generated_request, InMemory};
/// use sw4rm_timeouts::TimeoutProfileLayer;
/// use tower::{Layer, Service, ServiceExt};
///
/// let mut svc = TimeoutProfileLayer::standard().without_metrics().layer(InMemory::ok());
/// let request = generated_request("/sw4rm.registry.RegistryService/Heartbeat");
/// let response = svc.ready().await.unwrap().call(request).await.unwrap();
/// assert_eq!(response.status(), 200);
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct InMemory {
    ok_trailers: bool,
}

impl InMemory {
    /// Answers with an empty body and no trailers (the status unknown: as a call
    /// whose answer the layer only times).
    pub const fn empty() -> Self {
        InMemory { ok_trailers: false }
    }

    /// Answers with an empty body ending with `grpc-status: 0` trailers: a successful
    /// call, as metrics and the advisor's observations count it.
    pub const fn ok() -> Self {
        InMemory { ok_trailers: true }
    }
}

impl Service<Request> for InMemory {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request) -> Self::Future {
        let body = match self.ok_trailers {
            true => tonic::body::Body::new(OkTrailers { sent: false }),
            false => tonic::body::Body::empty(),
        };
        ready(Ok(http::Response::new(body)))
    }
}

/// An empty response body ending with `grpc-status: 0` trailers.
struct OkTrailers {
    sent: bool,
}

impl http_body::Body for OkTrailers {
    type Data = bytes::Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        if std::mem::replace(&mut self.sent, true) {
            return Poll::Ready(None);
        }
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        Poll::Ready(Some(Ok(http_body::Frame::trailers(trailers))))
    }

    fn is_end_stream(&self) -> bool {
        self.sent
    }
}

/// A request as a generated tonic client hands it to the channel: a POST over HTTP/2
/// to `uri` (a path, unless the client was given an origin), tonic's `content-type`
/// and `te` headers, the `GrpcMethod` extension, and a small message encoded into
/// tonic's 8 KiB encode buffer (a heartbeat naming an agent).
///
/// ```
/// let request = sw4rm_timeouts::testing::generated_request("/sw4rm.registry.RegistryService/Heartbeat");
/// assert_eq!(request.method(), http::Method::POST);
/// assert_eq!(request.headers()["te"], "trailers");
/// ```
pub fn generated_request(uri: &'static str) -> Request {
    let mut buffer = bytes::BytesMut::with_capacity(8 * 1024);
    buffer.extend_from_slice(b"\0\0\0\0\x0a\x0a\x08agent-42");
    let body = http_body_util::Full::new(buffer.split().freeze());
    let mut req = http::Request::new(tonic::body::Body::new(body));
    *req.method_mut() = http::Method::POST;
    *req.version_mut() = http::Version::HTTP_2;
    *req.uri_mut() = http::Uri::from_static(uri);
    let headers = req.headers_mut();
    headers.insert(
        "content-type",
        http::HeaderValue::from_static("application/grpc"),
    );
    headers.insert("te", http::HeaderValue::from_static("trailers"));
    req.extensions_mut().insert(tonic::GrpcMethod::new(
        "sw4rm.registry.RegistryService",
        "Heartbeat",
    ));
    req
}
