//! [`ReplayRequest`]: the request kept for replay, and each later attempt's request made from
//! it: the same head and byte-identical body, its own `grpc-timeout`, and gRPC A6's
//! `grpc-previous-rpc-attempts`. Keeping costs one move into the call's retry state
//! when the request is a usual one (its [`Head`] without copying the request's maps;
//! a message of at most [`INLINE_BODY`] bytes is kept inline).

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::uri::PathAndQuery;
use http::{Extensions, Method, Uri, Version};
use tonic::GrpcMethod;

use crate::policy::call_timeout::CallTimeout;

use crate::wire::grpc_timeout::GRPC_TIMEOUT;
use crate::wire::reassembled::{self, Whole};

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

/// The request a call keeps for replay, and what the layer already found of it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ToKeep<'a> {
    pub(crate) request: &'a Request,
    /// tonic's `GrpcMethod`, when the layer found it to be the request's one extension
    /// (`CallOptions::method_alone`): kept without looking it up again.
    pub(crate) method_alone: Option<&'a GrpcMethod<'static>>,
}

impl<'a> ToKeep<'a> {
    /// `request`, of which nothing was found yet.
    pub(crate) fn new(request: &'a Request) -> Self {
        ToKeep {
            request,
            method_alone: None,
        }
    }
}

/// A request kept for replay.
#[derive(Debug)]
pub(crate) struct ReplayRequest {
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

impl ReplayRequest {
    /// Keeps the head of `request` and its whole body, `bytes`.
    pub(crate) fn new(request: ToKeep<'_>, bytes: &Bytes) -> Self {
        let mut kept = ReplayRequest::vacant();
        kept.keep(request, bytes);
        kept
    }

    /// A request of no call: a POST to `/`, no headers, no extensions, no bytes.
    pub(crate) fn vacant() -> Self {
        ReplayRequest {
            head: Head::vacant(),
            body: Body::empty(),
        }
    }

    /// Keeps the head of `request` and its whole body, `bytes`, in place of what this
    /// held (a reused box's: written where it is, not moved there).
    pub(crate) fn keep(&mut self, request: ToKeep<'_>, bytes: &Bytes) {
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
    /// (inline ones are only marked gone: the next call's are written over them).
    pub(crate) fn clear(&mut self) {
        self.head.clear();
        match &mut self.body {
            Body::Inline { len, .. } => *len = 0,
            Body::Own(_) => self.body = Body::empty(),
        }
    }

    /// The kept bytes.
    fn bytes(&self) -> Bytes {
        match &self.body {
            Body::Inline { len, bytes } => Bytes::copy_from_slice(&bytes[..usize::from(*len)]),
            Body::Own(bytes) => bytes.clone(),
        }
    }

    /// Attempt `attempt`'s request, without a `grpc-timeout`: its sender writes that
    /// when the attempt goes out (`attempt.rs`, [`WireTimeout`](crate::attempts::WireTimeout)).
    pub(crate) fn request(&self, attempt: u32) -> Request {
        let body = reassembled::boxed(Whole::new(self.bytes()));
        let mut request = self.head.request(body);
        let headers = request.headers_mut();
        let previous = attempt.saturating_sub(1);
        headers.insert(PREVIOUS_ATTEMPTS, HeaderValue::from(previous));
        request
    }
}

// The head: a request head kept for replay without copying its maps. A call answered
// at its first attempt never looks at the copy, so the copy is kept as cheaply as
// the request allows: the few headers a generated client sends are kept inline
// instead of in a copy of the header map (two allocations), and the one extension it
// sets, tonic's `GrpcMethod`, as that value instead of a copy of the extension map
// (three); its method, URI and version, a POST to a path over HTTP/2, as the path. A
// head with more headers, or with other extensions, is copied whole, as `http` copies
// it. The maps are built again only for an attempt after the first.

/// Headers kept inline besides the two every generated client sends (`te: trailers`
/// and `content-type: application/grpc`, kept as flags): room for a caller's metadata
/// entry or two, or tonic's compression headers.
const INLINE_HEADERS: usize = 2;

/// The two headers every tonic client sends, with the values it sends.
const USUAL: [(HeaderName, &str); 2] = [
    (http::header::TE, "trailers"),
    (http::header::CONTENT_TYPE, "application/grpc"),
];

/// A request head kept for later attempts.
#[derive(Debug)]
pub(super) struct Head {
    target: Target,
    headers: Headers,
    extensions: Known,
}

/// Where and how the request is sent.
#[derive(Debug)]
enum Target {
    /// A POST over HTTP/2 to a path on the channel's origin, as a tonic client with
    /// no origin of its own sends (40 bytes where the three parts take 120).
    Path(PathAndQuery),
    /// Any other method, URI or version, boxed: only such a request pays for them.
    Other(Box<(Method, Uri, Version)>),
}

/// The headers, without those each attempt writes itself.
#[derive(Debug)]
enum Headers {
    /// Which of [`USUAL`] were sent (bit `i` for `USUAL[i]`), and the others.
    Inline {
        usual: u8,
        others: [Option<(HeaderName, HeaderValue)>; INLINE_HEADERS],
    },
    Copied(HeaderMap),
}

/// The extensions.
#[derive(Debug)]
enum Known {
    None,
    /// The one extension tonic's generated clients set.
    GrpcMethod(GrpcMethod<'static>),
    /// It and a per-call timeout, the extension callers set most.
    Timed(GrpcMethod<'static>, CallTimeout),
    Copied(Extensions),
}

impl Head {
    /// Keeps the head of `request` (never copying the request's maps when it has only
    /// the usual headers and extensions). `skip` names the headers each attempt writes
    /// itself.
    #[cfg(test)]
    pub(super) fn new(request: &Request, skip: &[HeaderName]) -> Self {
        let mut head = Head::vacant();
        head.keep(ToKeep::new(request), skip);
        head
    }

    /// The head of no request: a POST to `/`, no headers, no extensions.
    pub(super) fn vacant() -> Self {
        Head {
            target: Target::Path(PathAndQuery::from_static("/")),
            headers: Headers::none(),
            extensions: Known::None,
        }
    }

    /// Keeps the head of `request` in place of what this head held (never copying the
    /// request's maps when it has only the usual headers and extensions): written where
    /// the head is, a reused box's, without moving a new head there. `skip` names the
    /// headers each attempt writes itself.
    pub(super) fn keep(&mut self, to_keep: ToKeep<'_>, skip: &[HeaderName]) {
        let request = to_keep.request;
        self.target = Target::new(request);
        self.headers.keep(request.headers(), skip);
        self.extensions = Known::new(request.extensions(), to_keep.method_alone);
    }

    /// Lets go of the headers and extensions, and of a target other than a path (a
    /// path names a method, and generated clients' paths are static text).
    pub(super) fn clear(&mut self) {
        self.headers.clear();
        self.extensions = Known::None;
        if let Target::Other(_) = self.target {
            self.target = Target::Path(PathAndQuery::from_static("/"));
        }
    }

    /// A request with this head and `body`.
    pub(super) fn request<B>(&self, body: B) -> http::Request<B> {
        let mut request = http::Request::new(body);
        let (method, uri, version) = self.target.parts();
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        *request.version_mut() = version;
        *request.headers_mut() = self.headers.map();
        *request.extensions_mut() = self.extensions.map();
        request
    }
}

impl Target {
    fn new(request: &Request) -> Self {
        let uri = request.uri();
        let path_only = uri.scheme().is_none() && uri.authority().is_none();
        match uri.path_and_query() {
            Some(path)
                if path_only
                    && *request.method() == Method::POST
                    && request.version() == Version::HTTP_2 =>
            {
                Target::Path(path.clone())
            }
            _ => Target::Other(Box::new((
                request.method().clone(),
                uri.clone(),
                request.version(),
            ))),
        }
    }

    fn parts(&self) -> (Method, Uri, Version) {
        match self {
            Target::Path(path) => (Method::POST, Uri::from(path.clone()), Version::HTTP_2),
            Target::Other(other) => other.as_ref().clone(),
        }
    }
}

impl Headers {
    /// No headers: what a vacant or cleared head holds.
    #[inline]
    fn none() -> Headers {
        Headers::Inline {
            usual: 0,
            others: [None, None],
        }
    }

    /// Lets go of every header, dropping only what is there (a usual request's
    /// slots are empty).
    fn clear(&mut self) {
        match self {
            Headers::Inline { usual, others } => {
                *usual = 0;
                for slot in others.iter_mut().filter(|slot| slot.is_some()) {
                    *slot = None;
                }
            }
            Headers::Copied(_) => *self = Headers::none(),
        }
    }

    /// Keeps `headers` but `skip`, in place of what these held.
    fn keep(&mut self, headers: &HeaderMap, skip: &[HeaderName]) {
        let Headers::Inline { usual, others } = self else {
            // A copied map before: start from none.
            *self = Headers::none();
            return self.keep(headers, skip);
        };
        *usual = 0;
        let mut kept = 0;
        for (name, value) in headers {
            // The usual headers first: each is one comparison of a standard name.
            let bit = usual_bit(name, value);
            if bit & !*usual != 0 {
                *usual |= bit;
                continue;
            }
            if skip.contains(name) {
                continue;
            }
            let Some(slot) = others.get_mut(kept) else {
                *self = Headers::Copied(headers.clone());
                return;
            };
            *slot = Some((name.clone(), value.clone()));
            kept += 1;
        }
        for slot in others.iter_mut().skip(kept) {
            *slot = None;
        }
    }

    fn map(&self) -> HeaderMap {
        match self {
            Headers::Inline { usual, others } => {
                // Room for the headers each attempt writes itself (a timeout and
                // the attempts before).
                let mut map = HeaderMap::with_capacity(USUAL.len() + INLINE_HEADERS + 2);
                for (i, (name, value)) in USUAL.iter().enumerate() {
                    if usual & (1 << i) != 0 {
                        map.append(name.clone(), HeaderValue::from_static(value));
                    }
                }
                for (name, value) in others.iter().flatten() {
                    map.append(name.clone(), value.clone());
                }
                map
            }
            Headers::Copied(map) => map.clone(),
        }
    }
}

/// The bit of [`USUAL`] that this header is (0: none).
#[inline]
fn usual_bit(name: &HeaderName, value: &HeaderValue) -> u8 {
    let mut bit = 1;
    for (n, v) in &USUAL {
        if name == n && value.as_bytes() == v.as_bytes() {
            return bit;
        }
        bit <<= 1;
    }
    0
}

impl Known {
    /// The extensions to keep; `alone`: the `GrpcMethod` the layer found to be their
    /// one entry (trusted only while they still hold one).
    fn new(extensions: &Extensions, alone: Option<&GrpcMethod<'static>>) -> Self {
        match (extensions.len(), alone) {
            (0, _) => return Known::None,
            (1, Some(method)) => return Known::GrpcMethod(method.clone()),
            _ => {}
        }
        let method = extensions.get::<GrpcMethod<'static>>();
        match (extensions.len(), method) {
            (1, Some(method)) => Known::GrpcMethod(method.clone()),
            (2, Some(method)) => match extensions.get::<CallTimeout>() {
                Some(timeout) => Known::Timed(method.clone(), *timeout),
                None => Known::Copied(extensions.clone()),
            },
            _ => Known::Copied(extensions.clone()),
        }
    }

    fn map(&self) -> Extensions {
        match self {
            Known::None => Extensions::new(),
            Known::GrpcMethod(method) => {
                let mut map = Extensions::new();
                map.insert(method.clone());
                map
            }
            Known::Timed(method, timeout) => {
                let mut map = Extensions::new();
                map.insert(method.clone());
                map.insert(*timeout);
                map
            }
            Known::Copied(map) => map.clone(),
        }
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
        let kept = ReplayRequest::new(ToKeep::new(&sent), &Bytes::from_static(b"\0\0\0\0\x01x"));
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
            let kept = ReplayRequest::new(ToKeep::new(&sent), &view);
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
                let mut kept =
                    ReplayRequest::new(ToKeep::new(&sent), &Bytes::from(vec![1u8; before]));
                let bytes = Bytes::from(vec![2u8; after]);
                kept.keep(ToKeep::new(&sent), &bytes);
                let sent = kept.request(2).into_body().collect().await;
                assert_eq!(sent.unwrap().to_bytes(), bytes, "{after} over {before}");
            }
        }
    }
}

#[cfg(test)]
mod head_tests {
    use super::*;

    fn parts(headers: &[(&'static str, &'static str)]) -> http::request::Parts {
        let mut request = http::Request::post("http://h/sw4rm.registry.RegistryService/Heartbeat")
            .version(Version::HTTP_2);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap().into_parts().0
    }

    /// `parts` as the request whose head is kept.
    fn request(parts: &http::request::Parts) -> Request {
        let mut request = http::Request::new(tonic::body::Body::default());
        *request.method_mut() = parts.method.clone();
        *request.uri_mut() = parts.uri.clone();
        *request.version_mut() = parts.version;
        *request.headers_mut() = parts.headers.clone();
        *request.extensions_mut() = parts.extensions.clone();
        request
    }

    fn again(head: &Head) -> http::request::Parts {
        head.request(()).into_parts().0
    }

    /// Rows: the headers sent, whether they are kept inline, the headers an attempt
    /// after the first carries (before it writes its own `grpc-timeout`).
    #[test]
    fn headers_come_back_as_sent_without_those_each_attempt_writes() {
        let te = ("te", "trailers");
        let ct = ("content-type", "application/grpc");
        let auth = ("authorization", "Bearer t");
        let timeout = ("grpc-timeout", "5S");
        let tag = |v: &'static str| ("x-tag", v);
        let other_te = ("te", "deflate");
        type Sent<'a> = &'a [(&'static str, &'static str)];
        let rows: [(Sent, bool, Sent); 8] = [
            (&[], true, &[]),
            (&[te, ct, timeout], true, &[te, ct]),
            (&[te, ct, auth, tag("a")], true, &[te, ct, auth, tag("a")]),
            // A repeated header keeps its values in order.
            (
                &[ct, te, tag("a"), tag("b"), timeout],
                true,
                &[te, ct, tag("a"), tag("b")],
            ),
            // An unusual value, or a usual header sent twice, is kept as any other.
            (&[other_te, ct], true, &[ct, other_te]),
            (&[te, te, ct], true, &[te, te, ct]),
            (&[te, ct, other_te, auth], true, &[te, ct, other_te, auth]),
            // More than fit inline: the map is copied (with its timeout, which each
            // attempt overwrites).
            (
                &[te, ct, auth, tag("a"), tag("b"), timeout],
                false,
                &[te, ct, auth, tag("a"), tag("b"), timeout],
            ),
        ];
        for (sent, inline, expected) in rows {
            let skip = [HeaderName::from_static("grpc-timeout")];
            let head = Head::new(&request(&parts(sent)), &skip);
            assert_eq!(
                matches!(head.headers, Headers::Inline { .. }),
                inline,
                "{sent:?}"
            );
            // Equal maps: every name's values, in order.
            assert_eq!(again(&head).headers, parts(expected).headers, "{sent:?}");
        }
    }

    /// Rows: method, URI and version sent, and whether they are kept as the path.
    #[test]
    fn method_uri_and_version_come_back() {
        let path = "/sw4rm.registry.RegistryService/Heartbeat";
        let absolute = "http://h/sw4rm.registry.RegistryService/Heartbeat";
        let rows = [
            (Method::POST, path, Version::HTTP_2, true),
            (Method::POST, "/s/m?q=1", Version::HTTP_2, true),
            (Method::POST, absolute, Version::HTTP_2, false),
            (Method::PUT, path, Version::HTTP_2, false),
            (Method::POST, path, Version::HTTP_11, false),
        ];
        for (method, uri, version, as_path) in rows {
            let sent = http::Request::builder()
                .method(method.clone())
                .uri(uri)
                .version(version)
                .body(())
                .unwrap()
                .into_parts()
                .0;
            let head = Head::new(&request(&sent), &[]);
            assert_eq!(matches!(head.target, Target::Path(_)), as_path, "{uri}");
            let got = again(&head);
            assert_eq!((got.method, got.version), (method, version), "{uri}");
            assert_eq!(got.uri, uri);
            assert_eq!(got.uri.scheme(), sent.uri.scheme());
            assert_eq!(got.uri.authority(), sent.uri.authority());
        }
    }

    #[test]
    fn extensions_come_back_kept_as_values_when_only_grpc_method_and_a_timeout() {
        let method = GrpcMethod::new("sw4rm.registry.RegistryService", "Heartbeat");
        let timeout = CallTimeout::After(std::time::Duration::from_millis(1_500));
        let mut only_method = parts(&[]);
        only_method.extensions.insert(method.clone());
        let mut timed = parts(&[]);
        timed.extensions.insert(method.clone());
        timed.extensions.insert(timeout);
        let mut more = parts(&[]);
        more.extensions.insert(method.clone());
        more.extensions.insert(7u8);
        let mut timed_and_more = parts(&[]);
        timed_and_more.extensions.insert(method);
        timed_and_more.extensions.insert(timeout);
        timed_and_more.extensions.insert(7u8);
        let mut timeout_alone = parts(&[]);
        timeout_alone.extensions.insert(CallTimeout::Infinite);
        let rows = [
            (parts(&[]), true),
            (only_method, true),
            (timed, true),
            (more, false),
            (timed_and_more, false),
            (timeout_alone, false),
        ];
        for (p, value_kept) in rows {
            let head = Head::new(&request(&p), &[]);
            assert_eq!(
                !matches!(head.extensions, Known::Copied(_)),
                value_kept,
                "{p:?}"
            );
            let got = again(&head).extensions;
            assert_eq!(got.len(), p.extensions.len());
            let names = |e: &Extensions| {
                e.get::<GrpcMethod<'static>>()
                    .map(|m| (m.service().to_owned(), m.method().to_owned()))
            };
            assert_eq!(names(&got), names(&p.extensions));
            assert_eq!(got.get::<u8>(), p.extensions.get::<u8>());
            assert_eq!(got.get::<CallTimeout>(), p.extensions.get::<CallTimeout>());
        }
    }

    /// The method the layer found alone is trusted only while the extensions hold one
    /// entry: beside another, both are kept (copied), not the method alone.
    #[test]
    fn a_method_found_alone_is_not_trusted_beside_another_extension() {
        let method = GrpcMethod::new("sw4rm.registry.RegistryService", "Heartbeat");
        let mut more = parts(&[]);
        more.extensions.insert(method.clone());
        more.extensions.insert(7u8);
        let sent = request(&more);
        let mut head = Head::vacant();
        let hinted = ToKeep {
            request: &sent,
            method_alone: Some(&method),
        };
        head.keep(hinted, &[]);
        let got = again(&head).extensions;
        assert_eq!(got.len(), 2);
        assert_eq!(got.get::<u8>(), Some(&7));
    }

    /// A head kept where another was (a reused box) comes back exactly as one kept
    /// afresh: nothing of the one before (headers, extensions, target) stays.
    #[test]
    fn a_head_kept_over_another_holds_only_the_new_request() {
        let skip = [HeaderName::from_static("grpc-timeout")];
        let mut many = parts(&[
            ("te", "trailers"),
            ("authorization", "Bearer t"),
            ("x-a", "1"),
            ("x-b", "2"),
        ]);
        many.extensions.insert(7u8);
        let mut absolute = http::Request::put("http://h/s/m")
            .header("x-a", "1")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        absolute.extensions.insert(GrpcMethod::new("s", "m"));
        let mut usual = parts(&[("te", "trailers"), ("content-type", "application/grpc")]);
        usual.extensions.insert(GrpcMethod::new(
            "sw4rm.registry.RegistryService",
            "Heartbeat",
        ));
        let samples = [many, absolute, usual, parts(&[("x-c", "3")]), parts(&[])];
        for before in &samples {
            for after in &samples {
                let mut head = Head::new(&request(before), &skip);
                head.keep(ToKeep::new(&request(after)), &skip);
                let (got, fresh) = (again(&head), again(&Head::new(&request(after), &skip)));
                let context = format!("{:?} over {:?}", after.headers, before.headers);
                assert_eq!(got.headers, fresh.headers, "{context}");
                assert_eq!(
                    (&got.method, &got.uri, got.version),
                    (&fresh.method, &fresh.uri, fresh.version),
                    "{context}"
                );
                assert_eq!(got.extensions.len(), fresh.extensions.len(), "{context}");
                assert_eq!(
                    got.extensions.get::<u8>(),
                    fresh.extensions.get::<u8>(),
                    "{context}"
                );
            }
        }
    }

    /// A request let go of (`clear`, as a box given back is) keeps nothing: no
    /// headers, no extensions, no bytes; kept again, with a shorter body and other
    /// headers, it comes back exactly as one kept afresh (the bytes marked gone are
    /// not read, the header slots emptied are not kept).
    #[test]
    fn a_request_cleared_then_kept_again_holds_only_the_new_one() {
        let long = parts(&[("te", "trailers"), ("x-a", "1"), ("x-b", "2")]);
        let short = parts(&[("x-c", "3")]);
        let bodies = [vec![7u8; INLINE_BODY], vec![8u8; 3], vec![9u8; 500], vec![]];
        for (before, after) in [(&long, &short), (&short, &long), (&long, &long)] {
            for first in &bodies {
                for then in &bodies {
                    let mut kept = ReplayRequest::new(
                        ToKeep::new(&request(before)),
                        &Bytes::from(first.clone()),
                    );
                    kept.clear();
                    assert!(kept.bytes().is_empty(), "cleared: no bytes");
                    assert!(again(&kept.head).headers.is_empty(), "cleared: no headers");
                    let then_bytes = Bytes::from(then.clone());
                    kept.keep(ToKeep::new(&request(after)), &then_bytes);
                    let fresh = ReplayRequest::new(ToKeep::new(&request(after)), &then_bytes);
                    assert_eq!(
                        kept.bytes(),
                        then_bytes,
                        "{} over {}",
                        then.len(),
                        first.len()
                    );
                    assert_eq!(again(&kept.head).headers, again(&fresh.head).headers);
                }
            }
        }
    }
}
