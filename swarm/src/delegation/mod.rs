//! Delegating to another swarm (SW4-004 §4.3, SW4-005): the caller's loop every
//! SW4RM SDK ships as `delegate_to_swarm`, async and inside the crate's budgets.
//!
//! [`Delegation::run`] sends one `HandoffRequest` through a [`Gateway`] and acts on
//! the answer:
//!
//! * **accepted**: done.
//! * **`OVERLOADED`**: up to `max_retries_on_overloaded` sends again (default 2). The
//!   wait lies in `[retry_after_ms, 1.2 × retry_after_ms]` when the gateway gives a
//!   hint (conformance T-006); without one it is full jitter on
//!   `initial_backoff_ms × backoff_multiplierⁿ`, at most `max_backoff_ms` (250 ms,
//!   2.0 and 2000 ms where the policy has 0).
//! * **`REDIRECT`**, when `allow_spillover_routing` is on: the trimmed
//!   `redirect_to_agent_id` is sent next; an empty target answers `VALIDATION_ERROR`
//!   ("non-empty") and one already sent to answers `VALIDATION_ERROR` ("loop"), both
//!   before the bound of `max_redirects` hops (0: 2), past which the last `REDIRECT`
//!   is the answer. With spillover off the `REDIRECT` is returned as is.
//! * **the budget**: before every send the loop stops when the envelope's wall time
//!   or its epoch deadline is spent (or the cap of the scope it runs in); the time of
//!   every send and every wait is taken off; a wait longer than what is left is not
//!   waited. Either way the answer is `ACK_TIMEOUT`, "Delegation deadline exhausted
//!   before handoff acceptance". Each send carries an envelope saying what is left
//!   then, in both fields.
//! * **a cancel** of the [`sw4rm_timeouts::OperationBudget`] or inbound call the loop runs in
//!   stops it at once: nothing is sent after it, a wait is cut short.
//!
//! Every send keeps the `request_id` (the delegation's correlation id) and the
//! metadata, with a `bytes-v1` idempotency token ([`IDEMPOTENCY_TOKEN_KEY`]) so a
//! gateway can tell a send again from a new delegation.
//!
//! The outcome says what happened ([`DelegationOutcome`]: the final answer, why the
//! loop stopped, every gateway sent to); the loop records SW4-004/005's metrics
//! ([`crate::metrics::SWARM_DELEGATIONS_TOTAL`] and the rest) and a `sw4rm.delegate` span with
//! `sw4rm.correlation_id` (the `request_id`), `sw4rm.redirect_count`,
//! `sw4rm.redirect_chain` and `sw4rm.redirect_terminal_reason`.
//!
//! ## Cancelling a delegation
//!
//! [`crate::DelegationCancel`] sends `CancelDelegation` and waits as the parent chooses
//! ([`crate::CancelWait`]: abandon, try once, until acknowledged, until the delegate's work
//! ended), then reports what is known ([`crate::CancelOutcome`]): acknowledged or not, ended
//! within the grace or forced (`FORCED_PREEMPTION`), `UNIMPLEMENTED` (the work ends
//! with its budget, SW4-004 §5.7), or unknown. A delegate's grace is clamped to what is
//! left of the parent's own (T-016, floor 5000 ms), here and in the layer's cancel
//! cascade. On the delegate's side, [`crate::Delegations::answer_cancel`]
//! answers in one line, waiting when asked, and a cancel that arrives before its
//! handoff is kept and applied when the handoff does.
//!
//! Gateways: [`SwarmGateway`] sends through a [`sw4rm_timeouts::Sw4rm`] client (the `handoff`
//! profile, the layer's retries, the scope's caps) and takes the gateway's answer
//! from its `AcceptHandoff`/`RejectHandoff` call to this agent ([`HandoffAnswers`]);
//! any closure from a `Request<HandoffRequest>` to a `HandoffResponse` is a
//! [`Gateway`] too.

mod gateway;
pub(crate) mod idempotency;
mod outcome;
pub(crate) mod rules;
mod run;
mod token;

pub use gateway::{Gateway, HandoffAnswers, SwarmGateway, MAX_WAITING_ANSWERS};
pub use idempotency::{idempotency_token, IdempotencyError};
pub use outcome::{DelegationEnd, DelegationError, DelegationOutcome};
pub use run::{Delegation, IDEMPOTENCY_TOKEN_KEY};
