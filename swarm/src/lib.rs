//! SW4-004/005 for SW4RM agents that delegate or take delegated work, over
//! [`sw4rm_timeouts`]. An agent that only calls SW4RM services needs
//! `sw4rm-timeouts` alone; one that hands work to another agent or swarm, or takes
//! work handed to it, adds this crate.
//!
//! * **Handing work on**: [`HandoffLayer`] stacks over the timeout layer, so that every
//!   `RequestHandoff` made inside a scope carries the scope's `BudgetEnvelope` (one hop
//!   deeper, never more than is left) and, with the cascade on, is cancelled with
//!   the scope ([`HandoffLayer::with_cancel_cascade`]).
//! * **Delegating to another swarm**: [`Delegation::run`] is the caller's loop every
//!   SW4RM SDK ships as `delegate_to_swarm` (overloaded answers, redirects, the budget,
//!   a cancel), through a [`Gateway`] such as [`SwarmGateway`].
//! * **Cancelling a delegation**: [`DelegationCancel`] sends `CancelDelegation` and
//!   waits as the parent chooses ([`CancelWait`]), reporting a [`CancelOutcome`].
//! * **Taking delegated work**: [`Delegations`] runs each handoff's work under the
//!   budget it was handed and answers `CancelDelegation` in one line;
//!   [`DelegationBook`] is SW4-004's cancellation book as plain state.
//! * **Sending again safely**: [`idempotency_token`], upstream's portable `bytes-v1`
//!   token.
//!
//! The guide's chapters for this crate: [`guide::delegation`] and
//! [`guide::cancellation`]. Metrics names: [`metrics`].
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use sw4rm_swarm::HandoffLayer;
//! use sw4rm_timeouts::proto::sw4rm::handoff::HandoffRequest;
//! use sw4rm_timeouts::{OperationBudget, Sw4rm, TimeoutProfileLayer};
//! # let server = sw4rm_timeouts::testing::TestServer::start().await?;
//! let sw4rm = Sw4rm::connect_with(server.url(), TimeoutProfileLayer::standard()).await?;
//! let mut handoff = HandoffLayer::new()
//!     .with_cancel_cascade(Duration::from_secs(10))
//!     .client(&sw4rm);
//! let budget = OperationBudget::new(Duration::from_secs(20));
//! budget.run(handoff.request_handoff(HandoffRequest::default())).await?;
//! let sent = server.calls()[0].request_as::<HandoffRequest>().expect("a handoff");
//! assert!(sent.budget.is_some_and(|e| e.current_depth == 1 && e.wall_time_remaining_ms <= 20_000));
//! # Ok(()) }
//! ```
//!
//! ## Reading order (for contributors)
//!
//! `handoff/` (the layer: `stamp.rs` and `outgoing.rs` the envelope written,
//! `envelope.rs` its bytes, `cascade.rs` the cancel cascade) → `delegation/` (the
//! caller's loop: `run.rs`, its pure rules in `rules.rs`, `gateway.rs`, `outcome.rs`,
//! `token.rs` and `idempotency.rs` the token of a send again) → `cancel/` (sending a
//! cancel: `send.rs`, `outcome.rs` what it came to, `grace.rs` the grace rule,
//! `book.rs` the cancellation book) → `receive/` (the delegate's side) → `metrics.rs`.
//! What the crate builds on in the core beyond its API is `sw4rm_timeouts::seams`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod cancel;
mod delegation;
mod handoff;
pub mod metrics;
mod receive;

pub use cancel::{
    child_grace, effective_grace, CancelOutcome, CancelReport, CancelWait, DelegationCancel,
    CANCEL_OUTCOME_KEY, CANCEL_WAIT_KEY, ENDED_FORCED, ENDED_IN_GRACE, MIN_CANCEL_GRACE,
    WAIT_ENDED,
};
pub use delegation::{
    idempotency_token, Delegation, DelegationEnd, DelegationError, DelegationOutcome, Gateway,
    HandoffAnswers, IdempotencyError, SwarmGateway, IDEMPOTENCY_TOKEN_KEY, MAX_WAITING_ANSWERS,
};
pub use handoff::{remembered_handoffs, CallBudgetEnvelope, HandoffLayer, HandoffStamped};
pub use receive::{
    CancelAnswer, Delegated, DelegationBook, Delegations, HandoffRefused, PeerText,
    EARLY_CANCEL_MEMORY, MAX_EARLY_CANCELS,
};

/// The guide's chapters on delegation and cancellation across agents (the core's
/// chapters are [`sw4rm_timeouts::guide`]).
pub mod guide {
    #[doc = include_str!("../docs/delegation.md")]
    pub mod delegation {}
    #[doc = include_str!("../docs/cancellation.md")]
    pub mod cancellation {}
}

/// The README's code, compiled as a doctest so it cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
