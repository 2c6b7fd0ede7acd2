//! The client tower layer, shaped like tower's `timeout/`: one
//! [`TimeoutProfileLayer`], one [`TimeoutProfileService`], one pinned
//! [`future::ResponseFuture`] and one response body wrapper [`body::TimeoutBody`].
//!
//! Reading order for one RPC: `service.rs` (wiring) → `paths.rs` (the path's route,
//! asked of the profile table once per path) → `plan.rs` (the pure call plan:
//! resolve, timers, the smallest cap, the wire header) → `future.rs` (the call loop:
//! attempts from `crate::retry` one after another under the call's first timer) →
//! `ending.rs` (what an attempt's end means: the answer, a retry, or the call's
//! failure; `hedged.rs` the same for a hedged call's concurrent attempts) → `body.rs` (wait for messages under the remaining timers) → `record.rs`
//! (the per-call record that emits metrics, logs and the timeout status exactly
//! once). `delegation.rs` writes a handoff's budget envelope (SW4-004); `per_call.rs`
//! holds the request extensions a caller sets; `shared.rs` what every call of one
//! layer reads; `learned.rs` each hedged route's recent latency. Retries themselves (the attempt future, the kept request, the
//! budget) live in `src/retry/`.

pub mod body;
mod delegation;
mod ending;
pub mod future;
mod hedged;
mod layer;
mod learned;
mod observed;
mod paths;
mod per_call;
mod plan;
mod record;
mod service;
mod shared;

pub use crate::retry::{RetryBudget, ATTEMPTS_HEADER};
pub use crate::wire::error::BoxError;
pub use body::TimeoutBody;
pub use layer::TimeoutProfileLayer;
pub use observed::Observations;
pub use per_call::{CallBudgetEnvelope, CallHedging, CallRetry, CallStreamingPolicy, CallTimeout};
pub use service::TimeoutProfileService;
