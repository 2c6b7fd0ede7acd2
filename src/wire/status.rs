//! Reading what ended a call from the transport's error or the peer's status headers.

use super::first_words::FirstWords;
use tokio::time::Instant;
use tonic::{Code, Status};

/// An error from below the layer.
type Error = Box<dyn std::error::Error + Send + Sync>;

/// The `grpc-status` header (a constant name: looking it up parses nothing).
pub(crate) const GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");

/// gRPC status code names by number (`OK`, `CANCELLED`, …), as gRPC's service config
/// and OpenTelemetry's `rpc.response.status_code` spell them.
pub(crate) const CODE_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// The canonical name of a status code.
pub(crate) fn code_name(code: Code) -> &'static str {
    CODE_NAMES.get(code as usize).copied().unwrap_or("UNKNOWN")
}

/// Whether a request that failed with `code` is worth sending again later, by a loop
/// over many calls (a follow's poll, a cancel sent until acknowledged): the failures
/// that pass on their own (`UNAVAILABLE`, `DEADLINE_EXCEEDED`, `RESOURCE_EXHAUSTED`,
/// `ABORTED`).
pub fn passes(code: Code) -> bool {
    matches!(
        code,
        Code::Unavailable | Code::DeadlineExceeded | Code::ResourceExhausted | Code::Aborted
    )
}

/// The number a `grpc-status` value says (`None` when it is not a number). Every
/// gRPC code is one or two digits, read as they are; anything longer is parsed as
/// text (a sign, a leading zero, a number outside gRPC's codes).
#[inline]
pub(crate) fn status_number(value: &http::HeaderValue) -> Option<i32> {
    let digit = |b: u8| i32::from(b - b'0');
    match *value.as_bytes() {
        [one @ b'0'..=b'9'] => Some(digit(one)),
        [tens @ b'1'..=b'9', ones @ b'0'..=b'9'] => Some(digit(tens) * 10 + digit(ones)),
        _ => parse_status(value.as_bytes()),
    }
}

/// [`status_number`] for a value of any length.
#[cold]
fn parse_status(bytes: &[u8]) -> Option<i32> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// The `grpc-status` of headers or trailers (`None` without one; an unreadable value is
/// `Unknown`, as gRPC reads it).
#[inline]
pub(crate) fn code_of_headers(headers: &http::HeaderMap) -> Option<Code> {
    super::headers::find(headers, &GRPC_STATUS).map(code_of_value)
}

/// The code a `grpc-status` value says (an unreadable value is `Unknown`).
#[inline]
fn code_of_value(value: &http::HeaderValue) -> Code {
    status_number(value).map_or(Code::Unknown, Code::from_i32)
}

/// A response head with its `grpc-status` looked up once, for every question the
/// retry and timeout rules ask of it (a head without one, the common answer, costs
/// one lookup, not one per question).
#[derive(Clone, Copy, Debug)]
pub(crate) struct AnswerHead<'a> {
    pub(crate) headers: &'a http::HeaderMap,
    /// The head's `grpc-status` (a trailers-only answer has one).
    pub(crate) status: Option<&'a http::HeaderValue>,
}

impl<'a> AnswerHead<'a> {
    /// `headers`, their status looked up.
    #[inline]
    pub(crate) fn of(headers: &'a http::HeaderMap) -> Self {
        AnswerHead {
            headers,
            status: super::headers::find(headers, &GRPC_STATUS),
        }
    }

    /// The head's status code (`None` without one; unreadable is `Unknown`).
    #[inline]
    pub(crate) fn code(&self) -> Option<Code> {
        self.status.map(code_of_value)
    }
}

/// An error and its sources, outermost first.
pub(crate) fn causes<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(err), |e| e.source())
}

/// The status code a tonic client reports for an error from below the layer: a
/// `Status` in the error chain keeps its code, tonic's transport timer is `Cancelled`,
/// an HTTP/2 reset maps as gRPC's HTTP/2 protocol says, a refused connection is
/// `Unavailable`, anything else `Unknown`.
pub(crate) fn code_of_error(err: &(dyn std::error::Error + 'static)) -> Code {
    if causes(err).any(is_go_away) {
        return Code::Unavailable;
    }
    causes(err)
        .find_map(|e| {
            if let Some(status) = e.downcast_ref::<tonic::Status>() {
                return Some(status.code());
            }
            if e.is::<tonic::TimeoutExpired>() {
                return Some(Code::Cancelled);
            }
            if let Some(h2) = e.downcast_ref::<h2::Error>() {
                if let Some(reason) = h2.reason() {
                    return Some(code_of_reset(reason));
                }
            }
            (is_refused(e) || is_lost(e)).then_some(Code::Unavailable)
        })
        .unwrap_or(Code::Unknown)
}

/// An I/O error, as itself or inside h2's (which does not give it as a source).
fn io_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a std::io::Error> {
    e.downcast_ref::<std::io::Error>()
        .or_else(|| e.downcast_ref::<h2::Error>().and_then(h2::Error::get_io))
}

/// Whether `e` is the connection closed under the call by a `GOAWAY`, the server's or
/// the client's own (h2 sends one when a peer exhausts a budget of its, such as
/// `ENHANCE_YOUR_CALM` "too_many_data_frames"): gRPC says such a call is
/// `UNAVAILABLE`, where tonic reports `ENHANCE_YOUR_CALM` as `RESOURCE_EXHAUSTED`, a
/// code that reads like the server's own limit.
fn is_go_away(e: &(dyn std::error::Error + 'static)) -> bool {
    e.downcast_ref::<h2::Error>()
        .is_some_and(h2::Error::is_go_away)
}

/// Whether `e` is a refused connection.
fn is_refused(e: &(dyn std::error::Error + 'static)) -> bool {
    io_error(e).is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
}

/// Whether `e` says the connection was lost: reset, aborted, a broken pipe (as hyper
/// reports a connection it gave up on, its keepalive ping unanswered).
fn is_lost(e: &(dyn std::error::Error + 'static)) -> bool {
    io_error(e).is_some_and(|io| {
        matches!(
            io.kind(),
            std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::BrokenPipe
        )
    })
}

/// A response body that failed because the connection under it was lost, where no
/// status says more than `UNKNOWN`, or that was closed under it by a `GOAWAY`:
/// `UNAVAILABLE` naming the cause, as gRPC says a lost connection is, which a caller
/// may retry (tonic's channel makes the first `UNKNOWN` "error reading a body from
/// connection", the second `RESOURCE_EXHAUSTED` for `ENHANCE_YOUR_CALM`). Any other
/// error as it is.
pub(crate) fn lost_connection(err: Error) -> Error {
    let cause = || root_cause(&*err).to_string();
    if causes(&*err).any(is_go_away) {
        return Status::unavailable(format!(
            "the connection to the server was closed under the call: {}",
            cause()
        ))
        .into();
    }
    let said = causes(&*err).find_map(|e| e.downcast_ref::<Status>().map(Status::code));
    if !matches!(said, None | Some(Code::Unknown)) || !causes(&*err).any(is_lost) {
        return err;
    }
    Status::unavailable(format!(
        "the connection to the server was lost while the response was read: {}",
        cause()
    ))
    .into()
}

/// The innermost cause of an error: what actually went wrong ("Connection refused").
pub(crate) fn root_cause<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> &'a (dyn std::error::Error + 'static) {
    causes(error).last().unwrap_or(error)
}

/// The status for a call that could not connect (a `tonic::ConnectError` in the
/// chain, or `spoke_tls`: a plaintext connection whose server spoke TLS): `UNAVAILABLE`, naming the
/// endpoint (when known) and the innermost cause ("Connection refused") in one line,
/// with no source chain for a reporter to print a second time; any other error back
/// as it is.
pub(crate) fn unreachable(
    err: Error,
    endpoint: Option<&str>,
    heard: Option<FirstWords>,
) -> Result<Status, Error> {
    let speaks_tls =
        heard == Some(FirstWords::Tls) || causes(&*err).any(|e| e.to_string() == SERVER_SPEAKS_TLS);
    let closed = heard == Some(FirstWords::Closed);
    if !speaks_tls && !closed && !causes(&*err).any(|e| e.is::<tonic::ConnectError>()) {
        return Err(err);
    }
    let cause = match (speaks_tls, closed) {
        (true, _) => SERVER_SPEAKS_TLS.to_owned(),
        (false, true) => CLOSED_BEFORE_HTTP2.to_owned(),
        (false, false) => causes(&*err)
            .last()
            .map(ToString::to_string)
            .unwrap_or_default(),
    };
    let hint = tls_hint(&cause, endpoint.unwrap_or_default())
        .map(|h| format!(" ({h})"))
        .unwrap_or_default();
    Ok(Status::unavailable(match endpoint {
        Some(endpoint) => format!("cannot connect to the SW4RM endpoint {endpoint}: {cause}{hint}"),
        None => format!("cannot connect to the SW4RM endpoint: {cause}{hint}"),
    }))
}

/// What a TLS failure most likely means, in words that name the mistake (the cause as
/// rustls words it says something else).
pub(crate) fn tls_hint(cause: &str, endpoint: &str) -> Option<String> {
    if cause.contains("InvalidContentType") {
        let plain = endpoint
            .strip_prefix("https://")
            .map_or_else(|| endpoint.to_owned(), |rest| format!("http://{rest}"));
        return Some(format!(
            "the server answered in plaintext, not TLS: it does not serve TLS on this \
             port; use {plain} or the server's TLS port"
        ));
    }
    if cause.contains("UnknownIssuer") || cause.contains("BadSignature") {
        return Some(
            "the server's certificate is not signed by a CA this client trusts: for a \
             private CA give the client that CA (`ClientTlsConfig::ca_certificate` and \
             `domain_name` on your `Endpoint`, through `Sw4rm::builder`); for a public \
             one, the trust roots (`tls-native-roots` or `tls-webpki-roots`); the guide's \
             TLS chapter, `sw4rm_timeouts::guide::tls`"
                .to_owned(),
        );
    }
    if cause.contains("CaUsedAsEndEntity") {
        return Some(
            "the server presents a CA certificate (basicConstraints CA:TRUE) as its own, \
             as `openssl req -x509` makes by default: a certificate that is its own CA \
             cannot serve TLS; make a CA, sign a server certificate with it, give the \
             server that certificate and the client the CA (the guide's TLS chapter, `sw4rm_timeouts::guide::tls`, \
             shows how)"
                .to_owned(),
        );
    }
    None
}

/// What a connection whose peer closed it before speaking HTTP/2 is told.
pub(crate) const CLOSED_BEFORE_HTTP2: &str = "the peer accepted the connection and closed \
    it before speaking HTTP/2: is it a gRPC server, on this port?";

/// What a plaintext connection whose server answered in TLS is told.
pub(crate) const SERVER_SPEAKS_TLS: &str = "the server speaks TLS on this port, and the \
    endpoint is http:// (plaintext): use https:// with a TLS configuration";

/// gRPC's mapping of an HTTP/2 `RST_STREAM` reason to a status code (gRPC's
/// PROTOCOL-HTTP2, as tonic's client applies it): reasons the mapping does not name
/// (`STREAM_CLOSED`, `HTTP_1_1_REQUIRED`, unknown ones) are `UNKNOWN`.
pub(crate) fn code_of_reset(reason: h2::Reason) -> Code {
    match reason {
        h2::Reason::NO_ERROR
        | h2::Reason::PROTOCOL_ERROR
        | h2::Reason::INTERNAL_ERROR
        | h2::Reason::FLOW_CONTROL_ERROR
        | h2::Reason::SETTINGS_TIMEOUT
        | h2::Reason::FRAME_SIZE_ERROR
        | h2::Reason::COMPRESSION_ERROR
        | h2::Reason::CONNECT_ERROR => Code::Internal,
        h2::Reason::REFUSED_STREAM => Code::Unavailable,
        h2::Reason::CANCEL => Code::Cancelled,
        h2::Reason::ENHANCE_YOUR_CALM => Code::ResourceExhausted,
        h2::Reason::INADEQUATE_SECURITY => Code::PermissionDenied,
        _ => Code::Unknown,
    }
}

/// True when the error (or one of its sources) is tonic's transport timer firing
/// (tonic reports it as `Cancelled`, "Timeout expired").
pub(crate) fn is_transport_timeout(err: &(dyn std::error::Error + 'static)) -> bool {
    causes(err).any(|e| e.is::<tonic::TimeoutExpired>())
}

/// True when headers or trailers report that the server (or a proxy) ended the call
/// for *our* deadline: `grpc-status: 4` (DEADLINE_EXCEEDED) or `1` (CANCELLED, which
/// is how tonic servers report their own deadline) at or after our deadline (asked for
/// only then). Before it, the status is the server's own (its downstream call timed
/// out, say) and passes through unchanged, message and details, as plain gRPC does.
pub(crate) fn is_server_timeout(
    head: AnswerHead<'_>,
    deadline: impl FnOnce() -> Option<Instant>,
) -> bool {
    is_server_timeout_code(head.code(), deadline)
}

/// [`is_server_timeout`] for a status already read.
pub(crate) fn is_server_timeout_code(
    code: Option<Code>,
    deadline: impl FnOnce() -> Option<Instant>,
) -> bool {
    match code {
        Some(Code::DeadlineExceeded | Code::Cancelled) => {
            deadline().is_some_and(|d| Instant::now() >= d)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn code_names_follow_the_numbers() {
        assert_eq!(code_name(Code::Ok), "OK");
        assert_eq!(code_name(Code::DeadlineExceeded), "DEADLINE_EXCEEDED");
        assert_eq!(code_name(Code::Unauthenticated), "UNAUTHENTICATED");
        assert_eq!(CODE_NAMES.len(), Code::Unauthenticated as usize + 1);
    }

    /// Read as `str::parse` reads it, whatever the value: digits, signs, leading
    /// zeros, spaces, letters, bytes that are not UTF-8, nothing.
    #[test]
    fn a_status_number_is_what_parsing_its_text_says() {
        let mut values: Vec<Vec<u8>> = (0u8..=255).map(|b| vec![b]).collect();
        for a in b" +-09azAZ\x80\xff".iter() {
            for b in b" +-0159azAZ\x80\xff".iter() {
                values.push(vec![*a, *b]);
                values.push(vec![*a, *b, b'7']);
            }
        }
        for text in [
            "",
            "16",
            "99",
            "007",
            "-1",
            "+4",
            "2147483647",
            "2147483648",
        ] {
            values.push(text.as_bytes().to_vec());
        }
        for bytes in values {
            let Ok(value) = http::HeaderValue::from_bytes(&bytes) else {
                continue;
            };
            let parsed = std::str::from_utf8(&bytes)
                .ok()
                .and_then(|t| t.parse().ok());
            assert_eq!(status_number(&value), parsed, "{bytes:?}");
        }
    }

    #[test]
    fn header_codes() {
        let with = |v: &'static str| {
            let mut h = http::HeaderMap::new();
            h.insert("grpc-status", http::HeaderValue::from_static(v));
            h
        };
        assert_eq!(code_of_headers(&http::HeaderMap::new()), None);
        assert_eq!(code_of_headers(&with("0")), Some(Code::Ok));
        assert_eq!(code_of_headers(&with("14")), Some(Code::Unavailable));
        assert_eq!(code_of_headers(&with("x")), Some(Code::Unknown));
        assert_eq!(code_of_headers(&with("99")), Some(Code::Unknown));
    }

    #[test]
    fn error_codes() {
        #[derive(Debug)]
        struct Wrap(Box<dyn std::error::Error + Send + Sync>);
        impl std::fmt::Display for Wrap {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("wrapped")
            }
        }
        impl std::error::Error for Wrap {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&*self.0)
            }
        }
        let rows: [(Box<dyn std::error::Error + Send + Sync>, Code); 6] = [
            (Box::new(tonic::Status::not_found("x")), Code::NotFound),
            (
                Box::new(Wrap(Box::new(tonic::Status::aborted("x")))),
                Code::Aborted,
            ),
            (
                Box::new(h2::Error::from(h2::Reason::CANCEL)),
                Code::Cancelled,
            ),
            (
                Box::new(Wrap(Box::new(h2::Error::from(h2::Reason::REFUSED_STREAM)))),
                Code::Unavailable,
            ),
            (
                Box::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
                Code::Unavailable,
            ),
            (Box::new(std::fmt::Error), Code::Unknown),
        ];
        for (err, code) in rows {
            assert_eq!(code_of_error(&*err), code, "{err}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_timeout_is_ours_only_from_our_deadline_on() {
        let now = Instant::now();
        let status = |code: &'static str| {
            let mut h = http::HeaderMap::new();
            h.insert("grpc-status", http::HeaderValue::from_static(code));
            h
        };
        struct Row {
            code: &'static str,
            deadline: Option<Instant>,
            ours: bool,
        }
        let (past, future) = (Some(now), Some(now + Duration::from_secs(1)));
        let rows = [
            Row {
                code: "4",
                deadline: past,
                ours: true,
            },
            Row {
                code: "1",
                deadline: past,
                ours: true,
            },
            Row {
                code: "4",
                deadline: future,
                ours: false,
            },
            Row {
                code: "1",
                deadline: future,
                ours: false,
            },
            Row {
                code: "4",
                deadline: None,
                ours: false,
            },
            Row {
                code: "14",
                deadline: past,
                ours: false,
            },
            Row {
                code: "0",
                deadline: past,
                ours: false,
            },
        ];
        for row in rows {
            assert_eq!(
                is_server_timeout(AnswerHead::of(&status(row.code)), || row.deadline),
                row.ours,
                "grpc-status {} deadline {:?}",
                row.code,
                row.deadline.map(|d| d > now)
            );
        }
        let empty = http::HeaderMap::new();
        assert!(!is_server_timeout(AnswerHead::of(&empty), || past));
    }
}
