//! [`Kept`]: the request kept for replay, and each later attempt's request made from
//! it: the same head and byte-identical body, its own `grpc-timeout`, and gRPC A6's
//! `grpc-previous-rpc-attempts`. Keeping costs one move into the call's retry state
//! when the request is a usual one (`head.rs`; a message of at most
//! [`INLINE_BODY`] bytes is kept inline).

use bytes::Bytes;
use http::HeaderValue;

use super::head::Head;
use crate::wire::grpc_timeout::GRPC_TIMEOUT;
use crate::wire::reassembled::Whole;

type Request = http::Request<tonic::body::Body>;

/// The largest request body kept for replay by default (64 KiB); larger requests are
/// sent once.
pub(crate) const DEFAULT_REPLAY_LIMIT: usize = 64 * 1024;

/// gRPC A6's request header on attempts after the first: how many attempts came
/// before, so servers and proxies can tell a retry from a new call.
const PREVIOUS_ATTEMPTS: http::HeaderName =
    http::HeaderName::from_static("grpc-previous-rpc-attempts");

/// The headers each attempt writes itself, not kept.
const WRITTEN_PER_ATTEMPT: [http::HeaderName; 2] = [GRPC_TIMEOUT, PREVIOUS_ATTEMPTS];

/// Request bodies (a message with its 5-byte gRPC frame header) of at most this many
/// bytes are kept inline: a status read or a heartbeat naming an agent or a task fits.
/// (With their length and the kept body's tag, 88 bytes make 96, a multiple of the
/// kept body's alignment.)
pub(crate) const INLINE_BODY: usize = 88;

/// A request kept for replay.
#[derive(Debug)]
pub(crate) struct Kept {
    head: Head,
    body: Body,
}

/// The request's bytes: never a view into a larger buffer. tonic encodes a unary
/// request into a buffer of at least 8 KiB (`DEFAULT_CODEC_BUFFER_SIZE`, grown for a
/// larger message), and the frame it yields is a view into it: kept for replay, that
/// view would keep the whole buffer alive for as long as the call may be retried,
/// where plain tonic frees it once the request is written. A copy costs one
/// allocation and a `memcpy` of the request's size.
#[derive(Debug)]
enum Body {
    Inline { len: u8, bytes: [u8; INLINE_BODY] },
    Own(Bytes),
}

impl Body {
    /// No bytes, kept inline (zeroed).
    #[inline]
    fn empty() -> Body {
        Body::Inline {
            len: 0,
            bytes: [0; INLINE_BODY],
        }
    }
}

impl Kept {
    /// Keeps the head of `request` and its whole body, `bytes`.
    pub(crate) fn new(request: &Request, bytes: &Bytes) -> Self {
        let mut kept = Kept::vacant();
        kept.keep(request, bytes);
        kept
    }

    /// A request of no call: a POST to `/`, no headers, no extensions, no bytes.
    pub(crate) fn vacant() -> Self {
        Kept {
            head: Head::vacant(),
            body: Body::empty(),
        }
    }

    /// Keeps the head of `request` and its whole body, `bytes`, in place of what this
    /// held (a reused box's: written where it is, not moved there).
    pub(crate) fn keep(&mut self, request: &Request, bytes: &Bytes) {
        self.head.keep(request, &WRITTEN_PER_ATTEMPT);
        match (&mut self.body, bytes.len()) {
            (Body::Inline { len, bytes: inline }, n @ 0..=INLINE_BODY) => {
                inline[..n].copy_from_slice(bytes);
                *len = n as u8;
            }
            (_, n @ 0..=INLINE_BODY) => {
                let mut inline = [0; INLINE_BODY];
                inline[..n].copy_from_slice(bytes);
                self.body = Body::Inline {
                    len: n as u8,
                    bytes: inline,
                };
            }
            _ => self.body = Body::Own(Bytes::copy_from_slice(bytes)),
        }
    }

    /// Lets go of the request but its path: its headers and extensions, and its bytes
    /// (overwritten when inline).
    pub(crate) fn clear(&mut self) {
        self.head.clear();
        self.body = Body::empty();
    }

    /// The kept bytes.
    fn bytes(&self) -> Bytes {
        match &self.body {
            Body::Inline { len, bytes } => Bytes::copy_from_slice(&bytes[..usize::from(*len)]),
            Body::Own(bytes) => bytes.clone(),
        }
    }

    /// Attempt `attempt`'s request, without a `grpc-timeout`: its sender writes that
    /// when the attempt goes out (`deadline_header.rs`).
    pub(crate) fn request(&self, attempt: u32) -> Request {
        let body = tonic::body::Body::new(Whole::new(self.bytes()));
        let mut request = self.head.request(body);
        let headers = request.headers_mut();
        let previous = attempt.saturating_sub(1);
        headers.insert(PREVIOUS_ATTEMPTS, HeaderValue::from(previous));
        request
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn later_attempts_carry_the_attempts_before_and_no_timeout_of_the_first() {
        let mut sent = http::Request::post("/sw4rm.registry.RegistryService/Heartbeat")
            .header("grpc-timeout", "5000000u")
            .header("authorization", "Bearer t")
            .body(tonic::body::Body::default())
            .unwrap();
        sent.extensions_mut().insert(7u8);
        let kept = Kept::new(&sent, &Bytes::from_static(b"\0\0\0\0\x01x"));
        let second = kept.request(2);
        // The caller's timeout is not kept: each attempt's sender writes its own.
        assert!(second.headers().get("grpc-timeout").is_none());
        assert_eq!(second.headers()["grpc-previous-rpc-attempts"], "1");
        assert_eq!(second.headers()["authorization"], "Bearer t");
        assert_eq!(second.extensions().get::<u8>(), Some(&7));
        assert_eq!(
            second.uri().path(),
            "/sw4rm.registry.RegistryService/Heartbeat"
        );
        let body = second.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, Bytes::from_static(b"\0\0\0\0\x01x"));
        let third = kept.request(3);
        assert_eq!(third.headers()["grpc-previous-rpc-attempts"], "2");
    }

    /// A request encoded into a larger buffer (as tonic does, 8 KiB and more) is kept
    /// inline or as a copy of its own, so the buffer can be freed once the request is
    /// written. Every attempt sends the same bytes.
    #[tokio::test]
    async fn a_kept_request_never_pins_a_larger_buffer() {
        let sent = http::Request::new(tonic::body::Body::default());
        let rows = [
            (0, "inline"),
            (9, "inline"),
            (INLINE_BODY, "inline"),
            (INLINE_BODY + 1, "copy"),
            (4 * 1024, "copy"),
            (64 * 1024, "copy"),
        ];
        for (len, how) in rows {
            let mut buffer = BytesMut::with_capacity(8 * 1024 + len);
            buffer.extend_from_slice(&vec![7u8; len]);
            let view = buffer.split().freeze();
            let kept = Kept::new(&sent, &view);
            let got = match &kept.body {
                Body::Inline { .. } => "inline",
                Body::Own(b) if b.as_ptr() == view.as_ptr() => "a view into the buffer",
                Body::Own(_) => "copy",
            };
            assert_eq!(got, how, "{len}");
            for attempt in [2, 3] {
                let sent = kept.request(attempt).into_body().collect().await;
                assert_eq!(sent.unwrap().to_bytes(), view, "{len}");
            }
        }
    }

    /// A request kept where another was (a reused box) sends exactly its own bytes,
    /// whichever of the two was kept inline.
    #[tokio::test]
    async fn a_request_kept_over_another_sends_only_its_own_bytes() {
        let sent = http::Request::new(tonic::body::Body::default());
        let sizes = [0, 5, INLINE_BODY, INLINE_BODY + 1, 4 * 1024];
        for before in sizes {
            for after in sizes {
                let mut kept = Kept::new(&sent, &Bytes::from(vec![1u8; before]));
                let bytes = Bytes::from(vec![2u8; after]);
                kept.keep(&sent, &bytes);
                let sent = kept.request(2).into_body().collect().await;
                assert_eq!(sent.unwrap().to_bytes(), bytes, "{after} over {before}");
            }
        }
    }
}
