//! What the layer observes: the OpenTelemetry instruments (`metrics/`) and per-route
//! latency estimates (`latency/`: the histogram the advisor, `sw4rm-advise`, reads),
//! what an answer came under (`answered.rs`, for a layer built `with_answer_deadlines`),
//! and, with the feature `otel`, the trace context calls carry (`trace_context.rs`) and
//! what their spans are called (`span_name.rs`);
//! with `otlp`, the export of both to a Collector (`otlp/`).
//! Nothing here knows the tower layer: the layer records into these.

pub(crate) mod answered;
pub(crate) mod latency;
pub mod metrics;
#[cfg(feature = "otlp")]
pub mod otlp;
#[cfg(feature = "otel")]
pub(crate) mod span_name;
#[cfg(feature = "otel")]
pub(crate) mod trace_context;

#[cfg(feature = "otel")]
pub(crate) use trace_context::ids as trace_ids;

/// The trace and span ids a call's log events name: none without the feature `otel`.
#[cfg(not(feature = "otel"))]
#[inline(always)]
pub(crate) fn trace_ids(_: &tracing::Span) -> (Option<u8>, Option<u8>) {
    (None, None)
}
