//! Attempts inside one deadline (SW4-002 §5.2): everything that carries out retries
//! and hedges, in one folder. The decisions themselves are pure rules in
//! `policy/retry.rs`; the call loop that runs attempts one after another under the
//! call's one deadline is the response future (`timeout/future.rs`).
//!
//! Reading order: `attempt.rs` (one attempt: wait for the inner service to be ready,
//! call it, wait for the response headers, under the attempt's own timer) →
//! `outcome.rs` (what an attempt's end means to the rules: a final answer, or a
//! failure they may retry) → `state.rs` (one call's retry state: the attempt number
//! the rules decided, the attempt's timeout, the next attempt after a backoff) →
//! `pool.rs` (the boxes calls keep that state in, reused from call to call on each
//! thread) → `spare.rs` (the handle on the inner service that attempts after a call's
//! first go through, shared by the layered service's calls) → `kept.rs` (the request
//! kept for replay, and each later attempt's request; `head.rs` keeps its head without
//! copying the usual maps) → `budget.rs` (the layer's retry budget, shared by its
//! calls). `hedges.rs` runs the concurrent attempts of a hedged call (gRPC A6), from
//! the same kept request and on the same budget.
//!
//! Only what happens before the response headers reach the caller is retried: a
//! trailers-only answer (a gRPC error status), a transport error, or an attempt
//! timeout. Once headers are delivered the call is committed, so a server stream is
//! never retried after its first message.

mod attempt;
mod budget;
mod head;
mod hedges;
mod kept;
mod outcome;
mod pool;
mod spare;
mod state;

pub(crate) use attempt::{Attempt, Ended};
pub use budget::RetryBudget;
pub(crate) use hedges::{Event, HedgeContext, HedgePlan, Hedges};
pub(crate) use kept::{Kept, DEFAULT_REPLAY_LIMIT};
pub(crate) use outcome::{classify_error, classify_response};
pub(crate) use spare::{Spare, SpareSlot};
pub(crate) use state::{Resend, Retries, Retry, RetryPlan};

/// The header a final answer carries when the call made more than one attempt.
pub const ATTEMPTS_HEADER: &str = "sw4rm-attempts";
