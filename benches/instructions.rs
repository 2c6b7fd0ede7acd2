//! Instructions per call, for `valgrind --tool=callgrind` (deterministic, unlike time):
//! 20,000 unary calls, each a request as a generated client hands it to the channel,
//! through one variant against an in-memory service that answers at once.
//!
//! ```sh
//! cargo bench --bench instructions --no-run   # prints the executable's path
//! for v in plain retries-off retries-on; do
//!   valgrind --tool=callgrind --callgrind-out-file=cg.$v EXECUTABLE $v
//! done
//! ```
//!
//! The layer's instructions per call are a variant's total minus `plain`'s, divided by
//! 20,000 (setting up the layer is a few thousand instructions in all). Run without a
//! variant (as `cargo bench` does), it runs each once and prints nothing else.

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::task::{Context, Poll};

use http_body_util::BodyExt;
use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};
use tower::{Layer, Service};

type Request = http::Request<tonic::body::Body>;

const CALLS: usize = 20_000;

/// Answers every call at once with an empty body.
#[derive(Clone, Copy)]
struct Answer;

impl Service<Request> for Answer {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request) -> Self::Future {
        ready(Ok(http::Response::new(tonic::body::Body::empty())))
    }
}

/// A request as a generated client hands it to the channel: a small message encoded
/// into tonic's 8 KiB buffer, the `GrpcMethod` extension and tonic's headers.
fn request() -> Request {
    let mut buffer = bytes::BytesMut::with_capacity(8 * 1024);
    buffer.extend_from_slice(b"\0\0\0\0\x0a\x0a\x08agent-42");
    let body = http_body_util::Full::new(buffer.split().freeze());
    let mut req = http::Request::new(tonic::body::Body::new(body));
    *req.uri_mut() =
        http::Uri::from_static("http://127.0.0.1:1/sw4rm.registry.RegistryService/Heartbeat");
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
    req
}

async fn calls<S>(svc: &mut S)
where
    S: Service<Request>,
    S::Response: IntoBody,
    S::Error: std::fmt::Debug,
{
    for _ in 0..CALLS {
        let response = svc.call(request()).await.expect("answer");
        response.drain().await;
    }
}

/// Drains a response body.
trait IntoBody {
    async fn drain(self);
}

impl<B: http_body::Body> IntoBody for http::Response<B>
where
    B::Error: std::fmt::Debug,
{
    async fn drain(self) {
        let mut body = std::pin::pin!(self.into_body());
        while let Some(frame) = body.as_mut().frame().await {
            frame.expect("frame");
        }
    }
}

fn main() {
    let variant = std::env::args().nth(1).unwrap_or_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let on = TimeoutProfileLayer::new(ProfileSet::standard()).without_metrics();
    let off = on.clone().without_retries();
    rt.block_on(async {
        match variant.as_str() {
            "plain" => calls(&mut Answer).await,
            "retries-off" => calls(&mut off.layer(Answer)).await,
            "retries-on" => calls(&mut on.layer(Answer)).await,
            _ => {
                calls(&mut Answer).await;
                calls(&mut off.layer(Answer)).await;
                calls(&mut on.layer(Answer)).await;
            }
        }
    });
}
