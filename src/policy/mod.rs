//! The pure rules: no tokio, http or tonic here, only values and functions, each
//! tested row by row.
//!
//! Reading order: `profile.rs` (the SW4-002 §1 table; `profile_error.rs` what can be
//! wrong with a profile) → `route.rs` (request path → profile; `standard_routes.rs` the
//! table of every SW4RM RPC) → `resolve.rs` (per-call > message > profile default,
//! clamped by §2.2; `call_timeout.rs` the per-call value) → `streaming.rs` (§4.1 timers; `progress.rs` which
//! messages are progress for the idle limit of long work) → `deadline.rs` (the smallest cap
//! wins; the timer description shared by the response future and body). `retry.rs`
//! decides retries (SW4-002 §5.2) under a `retry_policy.rs`, `hedge.rs` hedges (gRPC
//! A6); `inherit.rs` caps calls by an inherited deadline or an operation budget;
//! `envelope.rs` reads the budget a handoff carried (SW4-004's `BudgetEnvelope`). `source.rs` is the one type that says where every value came
//! from. `quote.rs` cuts text from a peer or a user to a bound before it is echoed;
//! `ids.rs` draws random ids and jitter; `message_ids.rs` says which request fields carry
//! SW4-003's ids (a call's `correlation_id`, `agent_id`, `task_id`).

pub(crate) mod call_timeout;
pub(crate) mod cancel;
pub(crate) mod deadline;
pub(crate) mod effect;
pub(crate) mod envelope;
pub(crate) mod hedge;
pub(crate) mod ids;
pub(crate) mod inherit;
pub(crate) mod message;
pub(crate) mod message_ids;
#[cfg(feature = "follow")]
pub(crate) mod poll;
pub(crate) mod profile;
mod profile_error;
pub(crate) mod progress;
pub(crate) mod quote;
pub(crate) mod resolve;
pub(crate) mod retry;
mod retry_policy;
pub(crate) mod route;
pub(crate) mod source;
mod standard_routes;
pub(crate) mod streaming;
pub(crate) mod wrap_up;
