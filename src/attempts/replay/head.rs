//! [`Head`]: a request head kept for replay without copying its maps. A call answered
//! at its first attempt never looks at the copy, so the copy is kept as cheaply as
//! the request allows: the few headers a generated client sends are kept inline
//! instead of in a copy of the header map (two allocations), and the one extension it
//! sets, tonic's `GrpcMethod`, as that value instead of a copy of the extension map
//! (three); its method, URI and version, a POST to a path over HTTP/2, as the path. A
//! head with more headers, or with other extensions, is copied whole, as `http` copies
//! it. The maps are built again only for an attempt after the first.

use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::uri::PathAndQuery;
use http::{Extensions, Method, Uri, Version};
use tonic::GrpcMethod;

type Request = http::Request<tonic::body::Body>;

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
    Copied(Extensions),
}

impl Head {
    /// Keeps the head of `request` (never copying the request's maps when it has only
    /// the usual headers and extensions). `skip` names the headers each attempt writes
    /// itself.
    #[cfg(test)]
    pub(super) fn new(request: &Request, skip: &[HeaderName]) -> Self {
        let mut head = Head::vacant();
        head.keep(request, skip);
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
    pub(super) fn keep(&mut self, request: &Request, skip: &[HeaderName]) {
        self.target = Target::new(request);
        self.headers.keep(request.headers(), skip);
        self.extensions = Known::new(request.extensions());
    }

    /// Lets go of the headers and extensions, and of a target other than a path (a
    /// path names a method, and generated clients' paths are static text).
    pub(super) fn clear(&mut self) {
        self.headers = Headers::none();
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
    fn new(extensions: &Extensions) -> Self {
        if extensions.is_empty() {
            return Known::None;
        }
        match (extensions.len(), extensions.get::<GrpcMethod<'static>>()) {
            (1, Some(method)) => Known::GrpcMethod(method.clone()),
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
            Known::Copied(map) => map.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
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
    fn extensions_come_back_kept_as_a_value_when_only_grpc_method() {
        let method = GrpcMethod::new("sw4rm.registry.RegistryService", "Heartbeat");
        let mut only_method = parts(&[]);
        only_method.extensions.insert(method.clone());
        let mut more = parts(&[]);
        more.extensions.insert(method);
        more.extensions.insert(7u8);
        for (p, value_kept) in [(parts(&[]), true), (only_method, true), (more, false)] {
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
        }
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
                head.keep(&request(after), &skip);
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
}
