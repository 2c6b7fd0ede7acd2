//! The benches that measure the layer without sockets (`layer`, `instructions`) use the
//! crate's own in-memory service and generated-client request
//! (`sw4rm_timeouts::testing`), as its allocation tests do; this adds the deadline a
//! plain tonic call would set by hand, and draining a whole call.

use tower::Service;

pub use sw4rm_timeouts::testing::InMemory;

pub type Request = http::Request<tonic::body::Body>;

/// A request as a generated tonic client hands it to the channel; with
/// `deadline_by_hand`, the `grpc-timeout` a plain tonic call sets with `set_timeout`.
pub fn request(path: &'static str, deadline_by_hand: bool) -> Request {
    let mut req = sw4rm_timeouts::testing::generated_request(path);
    if deadline_by_hand {
        req.headers_mut()
            .insert("grpc-timeout", http::HeaderValue::from_static("5000000u"));
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
    use http_body_util::BodyExt;
    let response = svc.call(req).await.expect("answer");
    let mut body = std::pin::pin!(response.into_body());
    while let Some(frame) = body.as_mut().frame().await {
        frame.expect("frame");
    }
}
