//! Reading what ended a call from the transport's error or the peer's status headers.

use tokio::time::Instant;

/// True when the error (or one of its sources) is tonic's transport timer firing
/// (tonic reports it as `Cancelled`, "Timeout expired").
pub(crate) fn is_transport_timeout(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if e.is::<tonic::TimeoutExpired>() {
            return true;
        }
        cur = e.source();
    }
    false
}

/// True when headers or trailers report that the server (or a proxy) ended the call
/// for its deadline: `grpc-status: 4` (DEADLINE_EXCEEDED), or `grpc-status: 1`
/// (CANCELLED, which is how tonic servers report their own deadline) once our
/// deadline has passed.
pub(crate) fn is_server_timeout(headers: &http::HeaderMap, deadline: Option<Instant>) -> bool {
    match headers.get("grpc-status").map(|v| v.as_bytes()) {
        Some(b"4") => true,
        Some(b"1") => deadline.is_some_and(|d| Instant::now() >= d),
        _ => false,
    }
}
