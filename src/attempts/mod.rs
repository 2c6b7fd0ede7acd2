//! The attempt engine: carrying out one call's attempts inside its one deadline
//! (SW4-002 §5.2) — sent once, retried, or hedged (gRPC A6). The decisions are pure
//! rules in `policy/` (`retry.rs`, `hedge.rs`); this folder carries them out, writes
//! each attempt's `grpc-timeout`, and reports what happens through one [`Event`] type to
//! one [`Sink`] (the layer's call record, which turns events into metrics, logs and
//! timeout details). The tower glue (`timeout/`) uses the engine; the engine
//! never imports the glue.
//!
//! Reading order for one call: `call_loop.rs` (the loop: attempts one after another
//! under the call's one timer) → `attempt.rs` (one attempt: wait for the inner
//! service, call it, wait for the response headers; the one writer of an attempt's
//! `grpc-timeout`; and the timer) → `verdict.rs` (what an attempt's end means: the
//! answer, a retry, or the call's failure; and what a status or a transport error is
//! to the rules) → `retries.rs` (one call's retry state, the box it lives in, the next
//! attempt after a backoff) → `retry_budget.rs` (the layer's retry budget) → `event.rs` (what is
//! reported, and to whom). A hedged call: `hedges.rs` (its concurrent attempts) and
//! `hedge_verdict.rs` (what each one's end means). `hedge_rate.rs` is the layer's cap
//! on the share of calls that hedge; `hedge_delay.rs` the recent latency a learned
//! hedging delay is read from; `replay/` what a call keeps so that it can send its
//! request again, and why that costs one allocation.
//!
//! Only what happens before the response headers reach the caller is retried: a
//! trailers-only answer (a gRPC error status), a transport error, or an attempt
//! timeout. Once headers are delivered the call is committed, so a server stream is
//! never retried after its first message.

mod attempt;
mod call_loop;
mod event;
mod hedge_delay;
mod hedge_rate;
mod hedge_verdict;
mod hedges;
mod replay;
mod retries;
mod retry_budget;
mod verdict;

pub(crate) use attempt::{Attempt, Timer, WireTimeout};
pub(crate) use call_loop::CallLoop;
pub(crate) use event::{CallEnd, Deadlines, Event, Run, Sink};
pub(crate) use hedge_delay::RecentLatency;
pub(crate) use hedge_rate::HedgeRate;
pub use hedge_rate::{HedgeCap, DEFAULT_HEDGE_BURST};
pub(crate) use hedges::{HedgeContext, HedgePlan};
pub(crate) use replay::{ReplayRequest, Spare, SpareSlot, ToKeep, DEFAULT_REPLAY_LIMIT};
pub(crate) use retries::boxes::{pop, push};
pub(crate) use retries::{Retries, RetryPlan};
pub use retry_budget::RetryBudget;

/// The header a final answer carries when the call made more than one attempt.
pub const ATTEMPTS_HEADER: &str = "sw4rm-attempts";
