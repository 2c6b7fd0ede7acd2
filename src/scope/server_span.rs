//! The server span of an inbound call (`sw4rm_rpc_server`): made at the level the
//! inbound layer was given (`with_span_level`), or at INFO when it reads the caller's
//! trace context (feature `otel`). It names the call's method and the deadline the
//! call came with, and SW4-003's ids as the handler reads its request.

use std::sync::Arc;
use std::time::Duration;

use crate::policy::message_ids::{DeclaredIds, IdFields, IdPaths};
use crate::policy::route::split_path;
use crate::wire::message_ids::IdsOntoSpan;

/// What the inbound layer makes of each handler's server span.
#[derive(Clone, Debug, Default)]
pub(super) struct ServerSpans {
    /// The span's level, when one was asked for (`with_span_level`).
    pub(super) level: Option<tracing::Level>,
    /// Reads the caller's trace context (feature `otel`).
    #[cfg(feature = "otel")]
    pub(super) propagator: Option<crate::observe::trace_context::Propagator>,
    /// The OpenTelemetry name of the span (feature `otel`).
    #[cfg(feature = "otel")]
    pub(super) span_name: crate::SpanName,
    /// Where requests of routes the layer was told of carry SW4-003's ids.
    pub(super) message_ids: Arc<DeclaredIds>,
}

impl ServerSpans {
    /// The server span of a call that came with `received` (at the layer's level, or
    /// at INFO when a propagator reads the caller's context), watching `req`'s body
    /// for its ids; `None` when the layer makes none.
    pub(super) fn make<B: 'static>(
        &self,
        req: &mut http::Request<B>,
        received: Option<Duration>,
    ) -> Option<tracing::Span> {
        #[cfg(feature = "otel")]
        let traced = self.propagator.as_ref();
        #[cfg(not(feature = "otel"))]
        let traced: Option<()> = None;
        let level = self
            .level
            .or(traced.is_some().then_some(tracing::Level::INFO))?;
        let ms = received.map(|r| u64::try_from(r.as_millis()).unwrap_or(u64::MAX));
        let path = req.uri().path();
        let rpc = split_path(path);
        // The ids the route's requests carry, found before the body is lent out.
        let ids = rpc.and_then(|(service, method)| {
            let known = IdFields::of(service, method);
            self.message_ids.of(service, method, known)
        });
        #[cfg(feature = "otel")]
        let span = server_span(level, self.span_name, path, rpc, ms);
        #[cfg(not(feature = "otel"))]
        let span = server_span(level, path, ms);
        #[cfg(feature = "otel")]
        if let Some(propagator) = traced {
            crate::observe::trace_context::adopt_parent(propagator, req.headers(), &span);
        }
        if let Some(ids) = ids {
            watch_ids(req, &span, self.message_ids.paths(ids));
        }
        Some(span)
    }
}

/// The server span of an inbound call to `path` at `level`, with the deadline it was
/// given; with the feature `otel`, named for OpenTelemetry as `span_name` says (from
/// the path's service and method, `rpc`, when it has them).
fn server_span(
    level: tracing::Level,
    #[cfg(feature = "otel")] span_name: crate::SpanName,
    path: &str,
    #[cfg(feature = "otel")] rpc: Option<(&str, &str)>,
    deadline_ms: Option<u64>,
) -> tracing::Span {
    let name = path.strip_prefix('/').unwrap_or(path);
    #[cfg(feature = "otel")]
    let title = {
        let (service, method) = rpc.unwrap_or((name, ""));
        crate::observe::span_name::Title {
            name: span_name,
            service,
            method,
        }
    };
    #[cfg(not(feature = "otel"))]
    let title = "";
    macro_rules! span {
        ($make:ident) => {
            tracing::$make!(
                "sw4rm_rpc_server",
                rpc.method = name,
                sw4rm.deadline_ms = deadline_ms,
                // SW4-003's ids, from the request's first message ([`watch_ids`]).
                sw4rm.correlation_id = tracing::field::Empty,
                sw4rm.agent_id = tracing::field::Empty,
                sw4rm.task_id = tracing::field::Empty,
                otel.name = OTEL.then_some(tracing::field::display(&title)),
                otel.kind = OTEL.then_some("server"),
                rpc.system.name = OTEL.then_some("grpc"),
            )
        };
    }
    match level {
        tracing::Level::ERROR => span!(error_span),
        tracing::Level::WARN => span!(warn_span),
        tracing::Level::INFO => span!(info_span),
        tracing::Level::DEBUG => span!(debug_span),
        _ => span!(trace_span),
    }
}

/// Whether the server span carries OpenTelemetry's fields (feature `otel`).
const OTEL: bool = cfg!(feature = "otel");

/// Has the SW4-003 ids at `paths` of `request`'s message written onto its server
/// `span` as the handler reads the body: for tonic's request body, the one a tonic
/// server's layers are given. Whether a subscriber records the span does not matter
/// here (logging picks no code path): recording onto a span that is off does nothing.
fn watch_ids<B: 'static>(request: &mut http::Request<B>, span: &tracing::Span, paths: IdPaths) {
    let body: &mut dyn std::any::Any = request.body_mut();
    if let Some(body) = body.downcast_mut::<tonic::body::Body>() {
        IdsOntoSpan::watch(body, span.clone(), paths);
    }
}
