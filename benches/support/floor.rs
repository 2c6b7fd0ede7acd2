//! The least a timeout layer with retries can do per unary call, for measuring what
//! that much work costs over plain tonic (benches/README.md, "The floor"): find the
//! route's deadline, write its `grpc-timeout`, keep the request (head and whole body)
//! for a retry, enforce the deadline with a timer, read a trailers-only status, and
//! watch the body for its trailers; and look where a per-call value would be (a
//! `CallTimeout` extension, the caller's own `grpc-timeout`), as precedence must. No
//! record, no metrics, no scope, no hedging, no clamping: nothing else the layer does.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderValue;
use http_body::{Body as _, Frame};
use tonic::body::Body;
use tower::Service;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const GRPC_TIMEOUT: http::HeaderName = http::HeaderName::from_static("grpc-timeout");
const GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");

/// A route's deadline and the `grpc-timeout` value that says it.
#[derive(Clone)]
struct Route {
    deadline: Duration,
    wire: HeaderValue,
}

/// The floor: a layer that does only the essential work of one unary call.
#[derive(Clone)]
pub struct Floor<S> {
    inner: S,
    routes: Arc<HashMap<&'static str, Route>>,
}

impl<S> Floor<S> {
    /// `inner` with one route, `path`, whose deadline is `deadline`.
    pub fn new(inner: S, path: &'static str, deadline: Duration) -> Self {
        let wire = HeaderValue::from_str(&format!("{}m", deadline.as_millis())).expect("ascii");
        let routes = HashMap::from([(path, Route { deadline, wire })]);
        Floor {
            inner,
            routes: Arc::new(routes),
        }
    }
}

/// What a retry would send again: the head and the whole body.
#[allow(dead_code)] // kept for a retry, which the bench's calls never need
struct Kept {
    method: http::Method,
    uri: http::Uri,
    headers: http::HeaderMap,
    body: Bytes,
}

/// The whole body of a unary request, when it is all there (tonic encodes one message
/// at once).
fn take_whole(body: &mut Body) -> Option<Bytes> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut whole: Option<Bytes> = None;
    loop {
        match Pin::new(&mut *body).poll_frame(&mut cx) {
            Poll::Ready(None) => return whole,
            Poll::Ready(Some(Ok(frame))) => match (frame.into_data(), whole.is_none()) {
                (Ok(data), true) => whole = Some(data),
                _ => return None,
            },
            _ => return None,
        }
    }
}

/// The response body, watched for its trailers' `grpc-status`, under the call's
/// deadline.
pub struct Watched {
    body: Body,
    deadline: Pin<Box<tokio::time::Sleep>>,
    /// The trailers' status, as a layer records it (the bench reads none back).
    status: Option<tonic::Code>,
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let this = self.get_mut();
        if this.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(tonic::Status::deadline_exceeded("floor"))));
        }
        let frame = std::task::ready!(Pin::new(&mut this.body).poll_frame(cx));
        if let Some(Ok(frame)) = &frame {
            if let Some(trailers) = frame.trailers_ref() {
                this.status = trailers
                    .get(GRPC_STATUS)
                    .and_then(|v| v.to_str().ok()?.parse::<i32>().ok())
                    .map(tonic::Code::from);
            }
        }
        Poll::Ready(frame)
    }
}

impl<S> Service<http::Request<Body>> for Floor<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
    type Response = http::Response<Watched>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut req: http::Request<Body>) -> Self::Future {
        let route = self.routes.get(req.uri().path()).cloned();
        let Some(route) = route else {
            return Box::pin(async { Err("no route".into()) });
        };
        // Per-call values come first; the bench's calls have none.
        let asked = req
            .extensions()
            .get::<sw4rm_timeouts::CallTimeout>()
            .is_some()
            || req.headers().contains_key(GRPC_TIMEOUT);
        if asked {
            return Box::pin(async { Err("per-call values are not measured".into()) });
        }
        let kept = take_whole(req.body_mut()).map(|body| {
            let kept = Kept {
                method: req.method().clone(),
                uri: req.uri().clone(),
                headers: req.headers().clone(),
                body: body.clone(),
            };
            *req.body_mut() = Body::new(http_body_util::Full::new(body));
            kept
        });
        req.headers_mut().insert(GRPC_TIMEOUT, route.wire);
        let sent = self.inner.call(req);
        let mut deadline = Box::pin(tokio::time::sleep(route.deadline));
        Box::pin(async move {
            let mut sent = std::pin::pin!(sent);
            let answer = std::future::poll_fn(|cx| {
                if deadline.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Err(BoxError::from("deadline exceeded")));
                }
                sent.as_mut().poll(cx).map_err(Into::into)
            });
            let response = answer.await?;
            // A trailers-only answer says its status in the head: what a retry reads.
            let status = response
                .headers()
                .get(GRPC_STATUS)
                .and_then(|v| v.to_str().ok()?.parse::<i32>().ok());
            // Both live as long as a retry could want them; the bench's calls never retry.
            drop((kept, status));
            Ok(response.map(|body| Watched {
                body,
                deadline,
                status: None,
            }))
        })
    }
}
