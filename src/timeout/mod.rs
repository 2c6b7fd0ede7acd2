//! The client tower layer, shaped like tower's `timeout/`: one
//! [`TimeoutProfileLayer`], one [`TimeoutProfileService`], one pinned
//! [`future::ResponseFuture`] and one response body wrapper [`body::TimeoutBody`].
//!
//! Tower glue only: it plans the call, writes the plan onto the request, and hands the
//! attempts to the engine (`crate::attempts`), which reports back to the call record.
//!
//! Reading order for one RPC: `service.rs` (wiring) → `paths.rs` (the path's route,
//! asked of the profile table once per path) → `plan.rs` (the pure call plan:
//! resolve, timers, the smallest cap, the wire header) → `future.rs` (the call's
//! future: the engine's call loop and the call record) → `record.rs` (the per-call
//! record: the engine's sink, which emits metrics, logs and the timeout status exactly
//! once) → `body.rs` (wait for messages under the remaining timers).
//! `delegation.rs` writes a handoff's budget envelope (SW4-004); `per_call.rs` holds the
//! request extensions a caller sets; `shared.rs` what every call of one layer reads;
//! `hedge_windows.rs` each hedged route's recent latency; `observations.rs` what a
//! layer built `with_observations()` records for the advisor; `table.rs` where a call
//! finds all that (fixed, or swapped by `reload.rs`'s handle).

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

pub mod body;
mod cascade;
mod delegation;
pub mod future;
mod hedge_windows;
mod layer;
mod observations;
mod paths;
mod per_call;
mod plan;
mod record;
mod reload;
mod service;
mod shared;
mod table;

pub use crate::attempts::{RetryBudget, ATTEMPTS_HEADER};
pub use crate::wire::error::BoxError;
pub use body::TimeoutBody;
pub(crate) use cascade::CascadeSender;
pub use layer::TimeoutProfileLayer;
pub use observations::Observations;
pub use per_call::{
    CallBudgetEnvelope, CallHedging, CallProgress, CallRetry, CallStreamingPolicy, CallTimeout,
};
pub use reload::{ConfigWatch, CurrentProfiles, ReloadHandle, Reloaded};
pub use service::TimeoutProfileService;
