//! Trace context that follows the work (feature `otel`): the client layer injects the
//! call's span context into the request's metadata (W3C `traceparent` and
//! `tracestate`, and baggage if the propagator given carries it), and the inbound
//! layer extracts it so that the handler runs in a server span that is the caller's
//! child. Through OpenTelemetry's own `TextMapPropagator` (the layer's, given with
//! `with_trace_propagator`: no global state, no lock) and `tracing-opentelemetry`'s
//! span context.

use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// A propagator a layer holds.
pub(crate) type Propagator = Arc<dyn TextMapPropagator + Send + Sync>;

/// Headers as OpenTelemetry's propagators write them (a key or value that is no
/// valid header is left out).
struct Inject<'a>(&'a mut HeaderMap);

impl Injector for Inject<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// Headers as OpenTelemetry's propagators read them (a value that is not visible
/// ASCII reads as absent).
struct Extract<'a>(&'a HeaderMap);

impl Extractor for Extract<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

/// Writes the context of `span` (or, when the layer's span is off, of the span the
/// call was made in) into `headers`.
pub(crate) fn inject(propagator: &Propagator, span: &tracing::Span, headers: &mut HeaderMap) {
    propagator.inject_context(&context_of(span), &mut Inject(headers));
}

/// The trace context of a call: its span's, or, when that has none (the layer's span
/// is off, or no tracer records it), the context of the span it was made in.
fn context_of(span: &tracing::Span) -> opentelemetry::Context {
    use opentelemetry::trace::TraceContextExt as _;
    let own = span.context();
    match own.span().span_context().is_valid() {
        true => own,
        false => tracing::Span::current().context(),
    }
}

/// The trace and span ids of `span` (or, when it is off, of the span it was made
/// in), as W3C writes them, when a tracer gave it a valid context: what a call's log
/// events name so that a line finds its trace.
pub(crate) fn ids(
    span: &tracing::Span,
) -> (
    Option<tracing::field::DisplayValue<opentelemetry::trace::TraceId>>,
    Option<tracing::field::DisplayValue<opentelemetry::trace::SpanId>>,
) {
    use opentelemetry::trace::TraceContextExt as _;
    let cx = context_of(span);
    let context = cx.span().span_context().clone();
    if !context.is_valid() {
        return (None, None);
    }
    (
        Some(tracing::field::display(context.trace_id())),
        Some(tracing::field::display(context.span_id())),
    )
}

/// Makes the server `span` of an inbound call a child of the context its caller sent
/// in `headers` (a root when it sent none).
pub(crate) fn adopt_parent(propagator: &Propagator, headers: &HeaderMap, span: &tracing::Span) {
    let parent = propagator.extract(&Extract(headers));
    // A span no subscriber records has no context to set: nothing to do.
    let _ = span.set_parent(parent);
}
