//! [`Kept`]: the request kept for replay, and each later attempt's request made from
//! it: the same head and byte-identical body, its own `grpc-timeout`, and gRPC A6's
//! `grpc-previous-rpc-attempts`.

use std::time::Duration;

use bytes::Bytes;
use http::HeaderValue;

use crate::wire::grpc_timeout::{self, GRPC_TIMEOUT};
use crate::wire::replay::Replay;

type Request = http::Request<tonic::body::Body>;

/// The largest request body kept for replay by default (64 KiB); larger requests are
/// sent once.
pub(crate) const DEFAULT_REPLAY_LIMIT: usize = 64 * 1024;

/// gRPC A6's request header on attempts after the first: how many attempts came
/// before, so servers and proxies can tell a retry from a new call.
const PREVIOUS_ATTEMPTS: http::HeaderName =
    http::HeaderName::from_static("grpc-previous-rpc-attempts");

/// A request kept for replay.
#[derive(Debug)]
pub(crate) struct Kept {
    parts: http::request::Parts,
    body: Bytes,
}

impl Kept {
    /// Keeps a copy of the request head and the whole body (already compacted by
    /// `wire::replay::take_whole`: never a view into a larger buffer).
    pub(crate) fn new(parts: &http::request::Parts, body: Bytes) -> Self {
        Kept {
            parts: parts.clone(),
            body,
        }
    }

    /// Attempt `attempt`'s request under `timeout` (`None`: no deadline on the wire).
    pub(crate) fn request(&self, attempt: u32, timeout: Option<Duration>) -> Request {
        let mut parts = self.parts.clone();
        match timeout {
            Some(t) => {
                parts.headers.insert(GRPC_TIMEOUT, grpc_timeout::encode(t));
            }
            None => {
                parts.headers.remove(GRPC_TIMEOUT);
            }
        }
        let previous = attempt.saturating_sub(1);
        parts
            .headers
            .insert(PREVIOUS_ATTEMPTS, HeaderValue::from(previous));
        let body = tonic::body::Body::new(Replay::whole(self.body.clone()));
        http::Request::from_parts(parts, body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn later_attempts_carry_their_timeout_and_the_attempts_before() {
        let (mut parts, ()) = http::Request::post("/sw4rm.registry.RegistryService/Heartbeat")
            .header("grpc-timeout", "5000000u")
            .header("authorization", "Bearer t")
            .body(())
            .unwrap()
            .into_parts();
        parts.extensions.insert(7u8);
        let kept = Kept::new(&parts, Bytes::from_static(b"\0\0\0\0\x01x"));
        let second = kept.request(2, Some(Duration::from_millis(1500)));
        assert_eq!(second.headers()["grpc-timeout"], "1500000u");
        assert_eq!(second.headers()["grpc-previous-rpc-attempts"], "1");
        assert_eq!(second.headers()["authorization"], "Bearer t");
        assert_eq!(second.extensions().get::<u8>(), Some(&7));
        assert_eq!(
            second.uri().path(),
            "/sw4rm.registry.RegistryService/Heartbeat"
        );
        let body = second.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, Bytes::from_static(b"\0\0\0\0\x01x"));
        let third = kept.request(3, None);
        assert!(third.headers().get("grpc-timeout").is_none());
        assert_eq!(third.headers()["grpc-previous-rpc-attempts"], "2");
    }
}
