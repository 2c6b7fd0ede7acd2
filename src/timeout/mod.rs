//! The client tower layer, shaped like tower's `timeout/`: one
//! [`TimeoutProfileLayer`], one [`TimeoutProfileService`], one pinned
//! [`future::ResponseFuture`] and one response body wrapper [`body::TimeoutBody`]
//! (both in `response.rs`).
//!
//! Tower glue only: it plans the call, writes the plan onto the request, and hands the
//! attempts to the engine (`crate::attempts`), which reports back to the call record.
//!
//! Reading order for one RPC: `service.rs` (wiring) → `state/shared.rs` (the layer's
//! state, and in it the path's route and labels, asked of the profile table once per
//! path) → `plan.rs` (the pure call plan: resolve, timers, the smallest cap, the wire
//! header; `per_call.rs` holds the request extensions a caller sets) → `response.rs`
//! (the call's future: a lean call's first attempt, or the engine's call loop and the
//! call record; then the response body, which waits for messages under the remaining
//! timers) → `record/` (the per-call record: the engine's sink, which emits metrics,
//! logs and the timeout status exactly once; and the lean record of a call answered at
//! its first attempt, which opens the full one when it is not). The rooms beside the
//! glue: `state/` (what every call of one layer reads and where it finds it, each
//! path's route and labels and what is kept of it, the reload that swaps it, what was
//! observed for the advisor), `handoff/` (a handoff's budget envelope, SW4-004, and the
//! cancel cascade).

/// Emits one of a call's events inside its `sw4rm_rpc` span. An enabled span already
/// names the call's service, method and profile, so the event leaves them out and a
/// log line says each once; under a disabled span (its level off, the usual case) the
/// event names them itself.
macro_rules! call_event {
    ($level:ident, $span:expr, ($service:expr, $method:expr $(, $profile:expr)?), $($rest:tt)+) => {
        if $span.is_disabled() {
            tracing::$level!(
                service = %$service,
                method = %$method,
                $(profile = %$profile,)?
                $($rest)+
            )
        } else {
            $span.in_scope(|| tracing::$level!($($rest)+))
        }
    };
}

mod clamp_log;
mod handoff;
mod layer;
mod per_call;
mod plan;
mod record;
mod response;
mod service;
mod state;
mod stream_plan;

/// The layer's response future, where tower keeps its own (`tower::timeout::future`):
/// the type to name when a layered service's future is named.
///
/// ```
/// use sw4rm_timeouts::timeout::body::TimeoutBody;
/// use sw4rm_timeouts::timeout::future::ResponseFuture;
/// use sw4rm_timeouts::TimeoutProfileService;
/// use tonic::transport::Channel;
/// use tower_service::Service;
///
/// type Request = http::Request<tonic::body::Body>;
/// type ChannelFuture = <Channel as Service<Request>>::Future;
///
/// // What a call through the layer over a tonic channel returns, and what it answers.
/// fn call(svc: &mut TimeoutProfileService<Channel>, request: Request)
///     -> ResponseFuture<Channel, ChannelFuture>
/// {
///     svc.call(request)
/// }
/// type Answer = http::Response<TimeoutBody<tonic::body::Body>>;
/// let _: Option<<TimeoutProfileService<Channel> as Service<Request>>::Response> =
///     None::<Answer>;
/// # let _ = call;
/// ```
pub mod future {
    pub use super::response::ResponseFuture;
}

/// The layer's response body: a response's body under the call's remaining timers.
pub mod body {
    pub use super::response::TimeoutBody;
}

pub use crate::attempts::{RetryBudget, ATTEMPTS_HEADER};
pub use crate::wire::error::BoxError;
pub(crate) use handoff::cascade::CascadeSender;
pub use layer::TimeoutProfileLayer;
pub use per_call::{
    CallBudgetEnvelope, CallHedging, CallProgress, CallRetry, CallStreamingPolicy, CallTimeout,
};
pub use response::TimeoutBody;
pub use service::TimeoutProfileService;
pub use state::observations::Observations;
pub use state::reload::{ConfigWatch, CurrentProfiles, ReloadHandle, Reloaded};
