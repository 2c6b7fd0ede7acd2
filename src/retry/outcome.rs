//! What an attempt's end means to the retry rules (`policy/retry.rs`, which knows no
//! tonic and numbers status codes as the wire does): a trailers-only gRPC error, a
//! transport error that provably never reached the server, or one that may have.

use http::HeaderValue;
use tonic::Code;

use crate::policy::retry::{Failure, Pushback};
use crate::timeout::BoxError;
use crate::wire::status::{causes, status_number, GRPC_STATUS};

/// gRPC's server pushback header.
const RETRY_PUSHBACK: http::HeaderName = http::HeaderName::from_static("grpc-retry-pushback-ms");

/// The failure a status code is, to the rules.
pub(crate) fn code_failure(code: Code) -> Failure {
    Failure::Code(code as i32)
}

/// The status code of a failure the server answered.
fn failure_code(failure: Failure) -> Option<Code> {
    match failure {
        Failure::Code(code) => Some(Code::from_i32(code)),
        Failure::AttemptTimeout | Failure::NotSent => None,
    }
}

/// A response head's retry meaning: `Some` for a trailers-only gRPC error. When the
/// attempt's own timeout has passed (`attempt_expired`), the server's
/// `DEADLINE_EXCEEDED` or `CANCELLED` is that timeout.
pub(crate) fn classify_response(
    headers: &http::HeaderMap,
    attempt_expired: bool,
) -> Option<(Failure, Pushback)> {
    // The number as sent: one outside gRPC's codes stays itself, not `UNKNOWN`.
    let number = headers.get(GRPC_STATUS).and_then(status_number)?;
    let failure = match Code::from_i32(number) {
        Code::Ok => return None,
        Code::DeadlineExceeded | Code::Cancelled if attempt_expired => Failure::AttemptTimeout,
        _ => Failure::Code(number),
    };
    let pushback = Pushback::parse(headers.get(RETRY_PUSHBACK).map(HeaderValue::as_bytes));
    Some((failure, pushback))
}

/// A transport error's retry meaning: the request provably never reached the server
/// (connection refused, the stream refused by HTTP/2), or an `UNAVAILABLE` that may
/// have reached it.
///
/// h2 says a stream was never processed only with `REFUSED_STREAM` (RFC 9113 §8.7).
/// A request that raced onto a connection the peer was closing with `GOAWAY` comes
/// back from hyper as a canceled request or a connection error that does not say
/// whether its stream was past the `GOAWAY`'s last stream id, so it is treated as
/// possibly delivered: retried only when the RPC is idempotent.
pub(crate) fn classify_error(err: &BoxError) -> Failure {
    let never_sent = causes(&**err).any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
            || e.downcast_ref::<h2::Error>()
                .is_some_and(|h2| h2.reason() == Some(h2::Reason::REFUSED_STREAM))
    });
    if never_sent {
        Failure::NotSent
    } else {
        code_failure(Code::Unavailable)
    }
}

/// The `reason` a retry is logged with.
pub(crate) fn reason(failure: Failure) -> &'static str {
    match (failure, failure_code(failure)) {
        (Failure::AttemptTimeout, _) => "attempt_timeout",
        (Failure::NotSent, _) => "not_sent",
        (_, Some(Code::Unavailable)) => "unavailable",
        (_, _) => "status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses() {
        struct Row {
            status: Option<&'static str>,
            pushback: Option<&'static str>,
            expired: bool,
            want: Option<(Failure, Pushback)>,
        }
        let unavailable = code_failure(Code::Unavailable);
        let rows = [
            Row {
                status: None,
                pushback: None,
                expired: false,
                want: None,
            },
            Row {
                status: Some("0"),
                pushback: None,
                expired: true,
                want: None,
            },
            Row {
                status: Some("14"),
                pushback: None,
                expired: false,
                want: Some((unavailable, Pushback::None)),
            },
            Row {
                status: Some("14"),
                pushback: Some("-1"),
                expired: false,
                want: Some((unavailable, Pushback::Stop)),
            },
            Row {
                status: Some("4"),
                pushback: None,
                expired: false,
                want: Some((code_failure(Code::DeadlineExceeded), Pushback::None)),
            },
            // The attempt's own timeout passed: the server's deadline was the attempt's.
            Row {
                status: Some("4"),
                pushback: None,
                expired: true,
                want: Some((Failure::AttemptTimeout, Pushback::None)),
            },
            Row {
                status: Some("1"),
                pushback: None,
                expired: true,
                want: Some((Failure::AttemptTimeout, Pushback::None)),
            },
            Row {
                status: Some("14"),
                pushback: None,
                expired: true,
                want: Some((unavailable, Pushback::None)),
            },
        ];
        for row in rows {
            let mut h = http::HeaderMap::new();
            if let Some(s) = row.status {
                h.insert("grpc-status", HeaderValue::from_static(s));
            }
            if let Some(p) = row.pushback {
                h.insert("grpc-retry-pushback-ms", HeaderValue::from_static(p));
            }
            assert_eq!(
                classify_response(&h, row.expired),
                row.want,
                "{:?}",
                row.status
            );
        }
    }

    #[test]
    fn errors_and_reasons() {
        let refused: BoxError =
            Box::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(classify_error(&refused), Failure::NotSent);
        let stream: BoxError = Box::new(h2::Error::from(h2::Reason::REFUSED_STREAM));
        assert_eq!(classify_error(&stream), Failure::NotSent);
        let reset: BoxError = Box::new(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(classify_error(&reset), code_failure(Code::Unavailable));
        assert_eq!(reason(code_failure(Code::Unavailable)), "unavailable");
        assert_eq!(reason(code_failure(Code::Internal)), "status");
        assert_eq!(reason(Failure::AttemptTimeout), "attempt_timeout");
        assert_eq!(reason(Failure::NotSent), "not_sent");
    }
}
