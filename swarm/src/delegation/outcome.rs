//! What a delegation ended with: the final answer, why, and what the loop did on the
//! way ([`DelegationOutcome`]); or why it could not run or was stopped
//! ([`DelegationError`]).

use std::fmt;

use tonic::Status;

use crate::delegation::rules::{Made, Settled};
use sw4rm_timeouts::proto::sw4rm::handoff::{BudgetEnvelope, HandoffResponse};
use sw4rm_timeouts::seams::{cut, QUOTE_LIMIT};
use sw4rm_timeouts::CancelReason;

/// Why a delegation loop stopped, with its final answer
/// ([`DelegationOutcome::response`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DelegationEnd {
    /// A gateway accepted.
    Accepted,
    /// A gateway answered a rejection the loop does not act on (returned as is).
    Rejected,
    /// `OVERLOADED` after the last retry `max_retries_on_overloaded` allows (returned
    /// as is).
    RetriesSpent,
    /// `REDIRECT` with `allow_spillover_routing` off (returned as is).
    SpilloverOff,
    /// `REDIRECT` past `max_redirects` (the last `REDIRECT`, returned as is).
    RedirectLimit,
    /// `REDIRECT` without a target: the loop answers `VALIDATION_ERROR` ("non-empty").
    EmptyRedirect,
    /// `REDIRECT` to a gateway already sent to: `VALIDATION_ERROR` ("loop").
    RedirectLoop,
    /// `REDIRECT` to an id longer than 256 bytes: `VALIDATION_ERROR`.
    RedirectTooLong,
    /// The budget ran out before a gateway accepted: `ACK_TIMEOUT`.
    BudgetExhausted,
    /// `OVERLOADED` asked for a wait longer than the budget had left; it was not
    /// waited, and the gateway's `OVERLOADED` answer (with its `retry_after_ms`) is
    /// returned as is, as upstream's `delegate_to_swarm` returns it: code that reacts
    /// to `OVERLOADED` keeps working.
    WaitBeyondBudget,
}

impl DelegationEnd {
    /// The name used in logs, the `outcome` metric attribute and the span's
    /// `sw4rm.redirect_terminal_reason`.
    ///
    /// ```
    /// assert_eq!(sw4rm_swarm::DelegationEnd::RedirectLoop.as_str(), "redirect_loop");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            DelegationEnd::Accepted => "accepted",
            DelegationEnd::Rejected => "rejected",
            DelegationEnd::RetriesSpent => "retries_spent",
            DelegationEnd::SpilloverOff => "spillover_off",
            DelegationEnd::RedirectLimit => "redirect_limit",
            DelegationEnd::EmptyRedirect => "empty_redirect",
            DelegationEnd::RedirectLoop => "redirect_loop",
            DelegationEnd::RedirectTooLong => "redirect_too_long",
            DelegationEnd::BudgetExhausted => "budget_exhausted",
            DelegationEnd::WaitBeyondBudget => "wait_beyond_budget",
        }
    }

    /// Whether the budget ended it: `ACK_TIMEOUT` of the loop's making, or an
    /// `OVERLOADED` whose wait it could not hold.
    pub fn is_budget(self) -> bool {
        matches!(
            self,
            DelegationEnd::BudgetExhausted | DelegationEnd::WaitBeyondBudget
        )
    }

    pub(crate) fn kept(kept: Settled) -> Self {
        match kept {
            Settled::Accepted => DelegationEnd::Accepted,
            Settled::Rejected => DelegationEnd::Rejected,
            Settled::RetriesSpent => DelegationEnd::RetriesSpent,
            Settled::SpilloverOff => DelegationEnd::SpilloverOff,
            Settled::RedirectLimit => DelegationEnd::RedirectLimit,
            Settled::WaitBeyondBudget(_) => DelegationEnd::WaitBeyondBudget,
        }
    }

    pub(crate) fn made(made: &Made) -> Self {
        match made {
            Made::EmptyTarget => DelegationEnd::EmptyRedirect,
            Made::Loop(_) => DelegationEnd::RedirectLoop,
            Made::TargetTooLong(_) => DelegationEnd::RedirectTooLong,
            Made::Exhausted => DelegationEnd::BudgetExhausted,
        }
    }
}

impl fmt::Display for DelegationEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a delegation ended ([`crate::Delegation::run`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct DelegationOutcome {
    /// The final answer: a gateway's own (an `OVERLOADED` whose wait the budget
    /// could not hold included), or one the loop made (`VALIDATION_ERROR` for a
    /// redirect it refused, `ACK_TIMEOUT` for a spent budget), in upstream's wording.
    pub response: HandoffResponse,
    /// Why the loop stopped.
    pub end: DelegationEnd,
    /// Every gateway sent a `RequestHandoff`, in order, once per send (a gateway
    /// retried after `OVERLOADED` appears again).
    pub sent_to: Vec<String>,
    /// Sends again after `OVERLOADED`.
    pub retries: u32,
    /// Redirects followed.
    pub redirects: u32,
    /// The last answer a gateway gave, when the loop made the final one.
    pub last_gateway_answer: Option<HandoffResponse>,
    /// What was left of the budget when the loop stopped (both deadline fields agree).
    pub budget_left: BudgetEnvelope,
}

impl DelegationOutcome {
    /// Whether a gateway accepted.
    pub fn accepted(&self) -> bool {
        self.end == DelegationEnd::Accepted
    }
}

/// Why a delegation did not run to an answer.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum DelegationError {
    /// The request's `BudgetEnvelope` has no `deadline_epoch_ms` (SW4-005 §8 requires
    /// it for a delegation to another swarm).
    NoDeadline,
    /// The request's `deadline_epoch_ms` lies more than a day in the past: a mistake
    /// (seconds for milliseconds, most often), refused before sending rather than
    /// reported as a budget spent.
    DeadlineLongPast {
        /// The envelope's `deadline_epoch_ms`.
        deadline_epoch_ms: u64,
        /// How far in the past it lies.
        ago: std::time::Duration,
        /// Whether, read as seconds since the epoch, it would lie within a year of now.
        reads_as_seconds: bool,
    },
    /// The scope the loop ran in was cancelled: nothing was sent after it, a wait was
    /// cut short.
    Cancelled {
        /// Why the scope was cancelled.
        reason: CancelReason,
        /// Gateways sent a `RequestHandoff` before the cancel, in order.
        sent_to: Vec<String>,
    },
    /// Sending to a gateway failed (after the layer's own retries, if any).
    Gateway {
        /// The gateway.
        to_agent: String,
        /// What the send ended with.
        status: Status,
    },
}

impl fmt::Display for DelegationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DelegationError::NoDeadline => f.write_str(
                "delegation refused before sending: the HandoffRequest's BudgetEnvelope has \
                 deadline_epoch_ms 0, and SW4-005 requires an epoch deadline for a \
                 delegation to another swarm; set budget.deadline_epoch_ms",
            ),
            DelegationError::DeadlineLongPast {
                deadline_epoch_ms,
                ago,
                reads_as_seconds,
            } => {
                let days = ago.as_secs() / 86_400;
                let ago = match days {
                    0..=729 => format!("{days} days"),
                    _ => format!("{} years", days / 365),
                };
                write!(
                    f,
                    "delegation refused before sending: the BudgetEnvelope's deadline_epoch_ms \
                     {deadline_epoch_ms} is {ago} in the past"
                )?;
                if *reads_as_seconds {
                    f.write_str(
                        ": milliseconds since the epoch? (it reads as a deadline in seconds; \
                         multiply by 1,000)",
                    )
                } else {
                    f.write_str(": set it to now + the time the delegation may take, in ms")
                }
            }
            DelegationError::Cancelled { reason, sent_to } => write!(
                f,
                "delegation stopped by its scope's cancel ({}) after {} send(s): {}",
                reason.as_str(),
                sent_to.len(),
                reason.describe()
            ),
            DelegationError::Gateway { to_agent, status } => write!(
                f,
                "delegation to gateway {:?} failed: {:?} {}",
                cut(to_agent, QUOTE_LIMIT).to_string(),
                status.code(),
                cut(status.message(), QUOTE_LIMIT)
            ),
        }
    }
}

impl std::error::Error for DelegationError {}
