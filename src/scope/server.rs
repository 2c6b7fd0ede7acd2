//! [`InboundDeadlineLayer`]: the server side of deadline propagation, for tonic
//! servers (`Server::builder().layer(InboundDeadlineLayer::new())`). It reads the
//! inbound `grpc-timeout`, gives the handler the deadline (a request extension, and
//! the scope its outgoing calls see), and answers `DEADLINE_EXCEEDED` itself when
//! the deadline passes, dropping the handler.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};
use tonic::{Code, Status};
use tower_layer::Layer;
use tower_service::Service;

use std::sync::Arc;

use super::cancel::CancelSignal;
use super::server_span::ServerSpans;
use super::task::{inbound_signal, serving_rpc, Scoped};
use crate::policy::cancel::CancelReason;
use crate::policy::wrap_up::WrapUp;
use crate::wire::grpc_timeout::{self, GRPC_TIMEOUT};
#[cfg(feature = "long-work")]
use crate::wire::stream_idle;

/// The deadline of an inbound call, as a request extension for the handler.
///
/// ```
/// # async fn handler(request: tonic::Request<()>) {
/// use sw4rm_timeouts::scope::InboundDeadline;
/// if let Some(d) = request.extensions().get::<InboundDeadline>() {
///     println!("the caller gave {:?}; {:?} left", d.received(), d.remaining());
/// }
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InboundDeadline {
    at: Instant,
    received: Duration,
}

impl InboundDeadline {
    /// When the inbound call's deadline passes.
    pub fn at(&self) -> Instant {
        self.at
    }

    /// The `grpc-timeout` the call arrived with.
    pub fn received(&self) -> Duration {
        self.received
    }

    /// Time left now.
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }
}

/// A tower layer for tonic servers: inbound deadlines for handlers and their
/// outgoing calls (see the [module](crate::scope) for what flows by itself).
///
/// ```no_run
/// # use sw4rm_timeouts::proto::sw4rm::registry::registry_service_server::{RegistryService, RegistryServiceServer};
/// # async fn serve(svc: impl RegistryService) -> Result<(), Box<dyn std::error::Error>> {
/// use sw4rm_timeouts::scope::InboundDeadlineLayer;
/// tonic::transport::Server::builder()
///     .layer(InboundDeadlineLayer::new())
///     .add_service(RegistryServiceServer::new(svc))
///     .serve("127.0.0.1:50051".parse()?)
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct InboundDeadlineLayer {
    wrap_up: Option<WrapUp>,
    /// The handler's server span: when there is one, and what it names.
    spans: ServerSpans,
}

impl InboundDeadlineLayer {
    /// The layer.
    pub fn new() -> Self {
        InboundDeadlineLayer::default()
    }

    /// Tells each handler whose call has a deadline, `wrap_up` before it, that time
    /// is nearly up ([`super::should_wrap_up`], [`super::wrap_up_notice`]): the
    /// inbound scope's notice, for work of many calls that should stop starting new
    /// ones and answer with what it has. Off by default.
    ///
    /// ```
    /// use sw4rm_timeouts::scope::InboundDeadlineLayer;
    /// use sw4rm_timeouts::WrapUp;
    /// let layer = InboundDeadlineLayer::new().with_wrap_up(WrapUp::share(20));
    /// # drop(layer);
    /// ```
    pub fn with_wrap_up(mut self, wrap_up: WrapUp) -> Self {
        self.wrap_up = Some(wrap_up);
        self
    }

    /// Runs each handler in a server span (`sw4rm_rpc_server`, at INFO unless
    /// [`with_span_level`](Self::with_span_level) says otherwise; OpenTelemetry's
    /// `otel.name` and `otel.kind` = `server`, `rpc.system.name`, `rpc.method`, and
    /// `sw4rm.deadline_ms`, the deadline the call came with) whose parent is the trace
    /// context the caller sent, read with `propagator` (feature `otel`): the calls the
    /// handler makes are its children, so the trace follows the work across agents.
    /// The span carries SW4-003's `sw4rm.correlation_id`, `sw4rm.agent_id` and
    /// `sw4rm.task_id` from the request of each SW4RM RPC that has them, read from its
    /// first message as the handler reads it (each id cut to 128 bytes, none with a
    /// control character), so the handler's own log lines name them too.
    ///
    /// ```
    /// use opentelemetry_sdk::propagation::TraceContextPropagator;
    /// use sw4rm_timeouts::scope::InboundDeadlineLayer;
    /// let layer = InboundDeadlineLayer::new().with_trace_propagator(TraceContextPropagator::new());
    /// # drop(layer);
    /// ```
    #[cfg(feature = "otel")]
    #[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
    pub fn with_trace_propagator(
        mut self,
        propagator: impl opentelemetry::propagation::TextMapPropagator + Send + Sync + 'static,
    ) -> Self {
        self.spans.propagator = Some(Arc::new(propagator));
        self
    }

    /// What the server span is called in OpenTelemetry (feature `otel`), as
    /// [`crate::TimeoutProfileLayer::with_span_name`] says for the client's.
    ///
    /// ```
    /// use sw4rm_timeouts::scope::InboundDeadlineLayer;
    /// use sw4rm_timeouts::SpanName;
    /// let layer = InboundDeadlineLayer::new().with_span_name(SpanName::Sw4003);
    /// # drop(layer);
    /// ```
    #[cfg(feature = "otel")]
    #[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
    pub fn with_span_name(mut self, name: crate::SpanName) -> Self {
        self.spans.span_name = name;
        self
    }

    /// Names on the server span the SW4-003 ids that the requests of `route` carry
    /// where `ids` says, as [`crate::TimeoutProfileLayer::with_message_ids`] says for
    /// the client's.
    ///
    /// ```
    /// use sw4rm_timeouts::{route::RoutePattern, scope::InboundDeadlineLayer, MessageIds};
    /// let layer = InboundDeadlineLayer::new().with_message_ids(
    ///     RoutePattern::parse("/acme.tools.Runner/*")?,
    ///     MessageIds::new().correlation_id(&[2, 5]),
    /// );
    /// # drop(layer);
    /// # Ok::<(), String>(())
    /// ```
    pub fn with_message_ids(
        mut self,
        route: crate::route::RoutePattern,
        ids: crate::MessageIds,
    ) -> Self {
        Arc::make_mut(&mut self.spans.message_ids).set(route, ids);
        self
    }

    /// Runs each handler in a server span (`sw4rm_rpc_server`) at `level`, entered
    /// while the handler is polled: `rpc.method`, `sw4rm.deadline_ms` (the deadline
    /// the call came with) and SW4-003's ids of the request
    /// ([`with_message_ids`](Self::with_message_ids)), so that the handler's own log
    /// lines name the call they serve. Without it a handler gets a server span only
    /// when the layer reads the caller's trace context (`with_trace_propagator`,
    /// feature `otel`), at INFO.
    ///
    /// ```
    /// use sw4rm_timeouts::scope::InboundDeadlineLayer;
    /// let layer = InboundDeadlineLayer::new().with_span_level(tracing::Level::INFO);
    /// # drop(layer);
    /// ```
    pub fn with_span_level(mut self, level: tracing::Level) -> Self {
        self.spans.level = Some(level);
        self
    }
}

/// The handler's server span, entered while it is polled.
type ServerSpan = Option<tracing::Span>;

impl<S> Layer<S> for InboundDeadlineLayer {
    type Service = InboundDeadlineService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        InboundDeadlineService {
            inner,
            wrap_up: self.wrap_up,
            spans: self.spans.clone(),
        }
    }
}

/// The service of [`InboundDeadlineLayer`].
#[derive(Clone, Debug)]
pub struct InboundDeadlineService<S> {
    inner: S,
    wrap_up: Option<WrapUp>,
    spans: ServerSpans,
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for InboundDeadlineService<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    ReqBody: 'static,
    ResBody: Default,
{
    type Response = http::Response<ResBody>;
    type Error = S::Error;
    type Future = InboundDeadlineFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<ReqBody>) -> Self::Future {
        let received = match req.headers().get(GRPC_TIMEOUT) {
            None => None,
            Some(v) => match grpc_timeout::parse(v.as_bytes()) {
                Ok(d) => Some(d),
                Err(e) => {
                    return InboundDeadlineFuture {
                        state: State::Answer {
                            status: Some(Status::invalid_argument(e.to_string())),
                        },
                        call: None,
                        answered: false,
                        span: ServerSpan::default(),
                    }
                }
            },
        };
        let span = self.spans.make(&mut req, received);
        let call = inbound_signal();
        // How long the caller accepts a stream going quiet, and what a guard's status
        // names (`LongWork` without `for_rpc`: a reference count on the request's own
        // path, no copy): read for long work only.
        #[cfg(feature = "long-work")]
        let (quiet, rpc) = (
            stream_idle::read(req.headers()),
            req.uri().path_and_query().cloned(),
        );
        #[cfg(not(feature = "long-work"))]
        let (quiet, rpc) = (None, None);
        // An absurdly long deadline is as good as none (and must not overflow).
        let at = received.and_then(|r| Some((Instant::now().checked_add(r)?, r)));
        let Some((at, received)) = at else {
            return InboundDeadlineFuture {
                state: State::Unbounded {
                    inner: serving_rpc(rpc, None, quiet, None, call.clone(), self.inner.call(req)),
                },
                call: Some(call),
                answered: false,
                span,
            };
        };
        req.extensions_mut()
            .insert(InboundDeadline { at, received });
        let notice = self
            .wrap_up
            .and_then(|w| at.checked_sub(w.reserve(received)));
        InboundDeadlineFuture {
            state: State::Bounded {
                inner: serving_rpc(
                    rpc,
                    Some(at),
                    quiet,
                    notice,
                    call.clone(),
                    self.inner.call(req),
                ),
                sleep: tokio::time::sleep_until(at),
                at,
            },
            call: Some(call),
            answered: false,
            span,
        }
    }
}

pin_project! {
    /// Response future of [`InboundDeadlineService`].
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct InboundDeadlineFuture<F> {
        #[pin]
        state: State<F>,
        // What the handler's scope knows of the call.
        call: Option<Arc<CancelSignal>>,
        // The call was answered (by the handler or the deadline).
        answered: bool,
        // The handler's server span, entered while it is polled.
        span: ServerSpan,
    }

    impl<F> PinnedDrop for InboundDeadlineFuture<F> {
        /// Dropped before it answered: hyper drops a handler only when the caller
        /// reset the call or the connection closed. Said before the handler (a field)
        /// is dropped, so that its long work can tell the caller went away.
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let (false, Some(call)) = (*this.answered, this.call.as_ref()) {
                call.cancel(CancelReason::CallerGone);
            }
        }
    }
}

pin_project! {
    #[project = Proj]
    #[derive(Debug)]
    enum State<F> {
        // No inbound deadline: the handler in a scope that knows the call.
        Unbounded { #[pin] inner: Scoped<F> },
        // The handler inside its deadline's scope, racing the deadline.
        Bounded { #[pin] inner: Scoped<F>, #[pin] sleep: Sleep, at: Instant },
        // Answered without the handler (a malformed `grpc-timeout`).
        Answer { status: Option<Status> },
    }
}

impl<F, B, E> Future for InboundDeadlineFuture<F>
where
    F: Future<Output = Result<http::Response<B>, E>>,
    B: Default,
{
    type Output = Result<http::Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _entered = this.span.as_ref().map(tracing::Span::enter);
        let answer = poll_state(this.state, this.call.as_deref(), cx);
        *this.answered |= answer.is_ready();
        answer
    }
}

fn poll_state<F, B, E>(
    state: Pin<&mut State<F>>,
    call: Option<&CancelSignal>,
    cx: &mut Context<'_>,
) -> Poll<Result<http::Response<B>, E>>
where
    F: Future<Output = Result<http::Response<B>, E>>,
    B: Default,
{
    {
        match state.project() {
            Proj::Unbounded { inner } => inner.poll(cx),
            Proj::Bounded { inner, sleep, at } => {
                if let Poll::Ready(out) = inner.poll(cx) {
                    // tonic's own timer on the same deadline answers CANCELLED: at or
                    // after the deadline, say what happened.
                    return Poll::Ready(out.map(|r| deadline_answer(r, *at, call)));
                }
                match sleep.poll(cx) {
                    Poll::Ready(()) => {
                        // Said before the handler is dropped: work carried from it
                        // and its outgoing calls stop for the deadline.
                        if let Some(call) = call {
                            call.cancel(CancelReason::InboundDeadline);
                        }
                        Poll::Ready(Ok(exceeded(*at).into_http()))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
            Proj::Answer { status } => Poll::Ready(Ok(status
                .take()
                .unwrap_or_else(|| Status::internal("polled after completion"))
                .into_http())),
        }
    }
}

fn exceeded(_at: Instant) -> Status {
    Status::new(
        Code::DeadlineExceeded,
        "the inbound call's deadline passed before the handler answered",
    )
}

/// A trailers-only `CANCELLED` (tonic's timer) at or after the deadline becomes
/// `DEADLINE_EXCEEDED`.
fn deadline_answer<B: Default>(
    response: http::Response<B>,
    at: Instant,
    call: Option<&CancelSignal>,
) -> http::Response<B> {
    let cancelled = response
        .headers()
        .get(crate::wire::status::GRPC_STATUS)
        .is_some_and(|v| v.as_bytes() == b"1");
    if cancelled && Instant::now() >= at {
        if let Some(call) = call {
            call.cancel(CancelReason::InboundDeadline);
        }
        exceeded(at).into_http()
    } else {
        response
    }
}
