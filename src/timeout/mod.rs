//! The client tower layer, shaped like tower's `timeout/`: one
//! [`TimeoutProfileLayer`], one [`TimeoutProfileService`], one pinned
//! [`future::ResponseFuture`] (`future.rs`) and one response body wrapper
//! [`body::TimeoutBody`] (`body.rs`), the two public modules where tower keeps its own.
//!
//! Tower glue only: it plans the call, writes the plan onto the request, and hands the
//! attempts to the engine (`crate::attempts`), which reports back to the call record.
//! Every call takes the same way through it, whatever the log level.
//!
//! Reading order for one RPC: `service.rs` (wiring; `span.rs` its span) →
//! `state/shared.rs` (the layer's state, and in it the path's route and labels, asked
//! of the profile table once per path) → `plan.rs` (the pure call plan: resolve, timers, the smallest cap, the wire
//! header; a route's plan, made once and kept in `state/per_path.rs`; `per_call.rs`
//! holds the request extensions a caller sets) → `future.rs` (the call's future: the
//! engine's call loop and the call record) → `body.rs` (the response body, which waits
//! for messages under the remaining timers) → `record/` (the per-call record: the
//! engine's sink, which emits metrics, logs and the timeout status exactly once). The
//! rooms beside the glue: `state/` (what every call of one layer reads and where it
//! finds it, each path's route and labels and what is kept of it, the reload that
//! swaps it, what was observed for the advisor). Off the common call's path: `layer.rs`
//! (building the layer), `stream_plan.rs` (a stream's timers), `clamp_log.rs` (the
//! warnings of a call whose plan clamped something) and `refuse.rs` (a call a layer
//! above refused before it was sent: a delegation too deep or with nothing left).

/// Emits one of a call's events inside its `sw4rm_rpc` span. An enabled span already
/// names the call's service, method and profile (and its request's `correlation_id`),
/// so the event leaves them out and a log line says each once; under a disabled span
/// (its level off, the usual case) the event names them itself (`correlation_id` when
/// the request had one, SW4-003 §4.3). With the feature `otel`, an event also names the trace
/// and span it belongs to (`trace_id`, `span_id`) when a tracer gave it one, so a log
/// line finds its trace (without it both are `None` and record nothing).
macro_rules! call_event {
    ($level:ident, $span:expr, $correlation:expr, ($service:expr, $method:expr $(, $profile:expr)?), $($rest:tt)+) => {{
        let (trace_id, span_id) = crate::observe::trace_ids(&$span);
        if $span.is_disabled() {
            // Read only when the event is enabled (a field's value is).
            tracing::$level!(
                service = %$service,
                method = %$method,
                $(profile = %$profile,)?
                correlation_id = $correlation,
                trace_id,
                span_id,
                $($rest)+
            )
        } else {
            $span.in_scope(|| tracing::$level!(trace_id, span_id, $($rest)+))
        }
    }};
}

pub mod body;
mod clamp_log;
pub mod future;
mod layer;
mod per_call;
mod plan;
mod record;
pub(crate) mod refuse;
mod service;
mod span;
mod state;
mod stream_plan;

pub use crate::attempts::{RetryBudget, ATTEMPTS_HEADER};
pub use crate::wire::error::BoxError;
pub use body::TimeoutBody;
pub use layer::TimeoutProfileLayer;
pub use per_call::{CallHedging, CallProgress, CallRetry, CallStreamingPolicy, CallTimeout};
pub use service::TimeoutProfileService;
pub use state::observations::Observations;
pub use state::reload::{ConfigWatch, CurrentProfiles, ReloadHandle, Reloaded};
