//! What a follow ends with: the terminal status ([`Followed`]) or why there is none
//! ([`FollowError`]), and what a cancel RPC came to ([`CancelSent`]).

use std::time::Duration;

use tonic::Status;

use crate::policy::cancel::CancelReason;
use crate::policy::effect::CallEffect;

/// What a followed operation ended with.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Followed<S> {
    /// The terminal status.
    pub status: S,
    /// Status polls answered.
    pub polls: u32,
    /// Status polls that failed and were sent again (a `NOT_FOUND` while the submit's
    /// answer was lost and its settle window ran is one of them).
    pub failed_polls: u32,
    /// `None` when the submit was answered; the effect of a submit whose answer was
    /// lost (it was followed by status, never sent again).
    pub submit_unanswered: Option<CallEffect>,
}

/// What the cancel RPC came to, when the scope was cancelled.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum CancelSent {
    /// Nothing had been submitted: nothing to cancel, nothing sent.
    NotNeeded,
    /// Sent; the server said whether it cancelled.
    Answered {
        /// Whether the server says it cancelled the operation.
        cancelled: bool,
    },
    /// Sent, and it failed (its own bound, [`Follow::cancel_timeout`], included): the
    /// operation may run on.
    ///
    /// [`Follow::cancel_timeout`]: super::Follow::cancel_timeout
    Failed(Status),
}

/// Why a followed operation did not reach a terminal state.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum FollowError<S> {
    /// The submit never reached the transport: nothing happened; safe to run again.
    NotSubmitted(Status),
    /// The server answered the submit and did not take it.
    Refused(String),
    /// The server answered the submit with an error.
    SubmitFailed(Status),
    /// The submit's answer was lost, and the status RPC has not known the operation
    /// (`NOT_FOUND`) for at least [`Follow::not_found_settle`] since the submit was
    /// sent, over at least [`NOT_FOUND_POLLS`] polls: it did not take effect; safe to
    /// submit again.
    ///
    /// [`Follow::not_found_settle`]: super::Follow::not_found_settle
    /// [`NOT_FOUND_POLLS`]: super::NOT_FOUND_POLLS
    NotTaken(Status),
    /// The submit's answer was lost and the status RPC did not know the operation
    /// (`NOT_FOUND`), but the budget ended before that had held over the settle
    /// window: a handler cut by the timeout may still commit it. **Not** safe to
    /// submit again: follow it again (a new budget), or cancel it.
    Indeterminate {
        /// The last `NOT_FOUND`.
        status: Status,
        /// Polls that answered `NOT_FOUND`.
        not_found_polls: u32,
        /// From the submit's send to the last `NOT_FOUND`.
        since_sent: Duration,
    },
    /// The scope was cancelled; the cancel RPC was sent once (if anything had been
    /// submitted) and this is what it came to.
    Cancelled {
        /// Why the scope was cancelled.
        reason: CancelReason,
        /// The cancel RPC's outcome.
        cancel: CancelSent,
        /// The last status seen.
        last: Option<S>,
    },
    /// The scope's budget (or the follow's own [`Follow::limit`]) ran out before a
    /// terminal state: the operation runs on.
    ///
    /// [`Follow::limit`]: super::Follow::limit
    BudgetSpent {
        /// The last status seen.
        last: Option<S>,
    },
    /// A status poll failed in a way that does not pass (or too many in a row did).
    Poll {
        /// The poll's status.
        status: Status,
        /// The last status seen.
        last: Option<S>,
    },
}

impl<S> std::fmt::Display for FollowError<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FollowError::NotSubmitted(s) => {
                write!(f, "not submitted (safe to run again): {}", s.message())
            }
            FollowError::Refused(r) => write!(f, "the server refused the submit: {r}"),
            FollowError::SubmitFailed(s) => {
                write!(f, "the submit failed: {:?} {}", s.code(), s.message())
            }
            FollowError::NotTaken(s) => write!(
                f,
                "the submit's answer was lost and the server does not know the operation \
                 over the settle window ({}): it did not take effect; safe to submit again",
                s.message()
            ),
            FollowError::Indeterminate {
                status,
                not_found_polls,
                since_sent,
            } => write!(
                f,
                "the submit's answer was lost and the server did not know the operation \
                 in {not_found_polls} polls up to {} ms after the submit was sent ({}), but \
                 the budget ended before the settle window did: it may still take effect, so \
                 do not submit again; follow it again with a new budget, or cancel it",
                since_sent.as_millis(),
                status.message()
            ),
            FollowError::Cancelled { reason, cancel, .. } => {
                write!(
                    f,
                    "cancelled ({}); the cancel RPC: {cancel:?}",
                    reason.as_str()
                )
            }
            FollowError::BudgetSpent { .. } => f.write_str(
                "the budget ran out before the operation ended: it runs on (follow it again \
                 with a new budget, or cancel it)",
            ),
            FollowError::Poll { status, .. } => {
                write!(
                    f,
                    "a status poll failed: {:?} {}",
                    status.code(),
                    status.message()
                )
            }
        }
    }
}

impl<S: std::fmt::Debug> std::error::Error for FollowError<S> {}
