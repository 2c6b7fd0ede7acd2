//! Submit once, then follow: operations that outlive a request (a scheduler task, a
//! workflow) submitted **once** under their profile, then followed by their status
//! RPC until a terminal state, inside the budget of the scope they run in.
//!
//! * The submit is sent once, never again. A submit whose answer is lost (a timeout
//!   after it was sent, a connection cut: [`crate::CallEffect::MutationIndeterminate`])
//!   is followed by status with the same id, not re-sent. If the status RPC does not
//!   know the operation (`NOT_FOUND`) and goes on not knowing it over a settle window
//!   from the submit's send ([`Follow::not_found_settle`], at least
//!   [`NOT_FOUND_POLLS`] polls), it did not take effect ([`FollowError::NotTaken`]:
//!   safe to submit again); a budget that ends inside the window ends the follow with
//!   [`FollowError::Indeterminate`] (it may still take effect: do not submit again).
//!   A submit that never reached the transport is [`FollowError::NotSubmitted`].
//! * Polls come at an interval that starts at [`Follow::poll_every`] and grows up to
//!   a ceiling, each wait half fixed and half random and never below 50 ms; a server's
//!   suggestion replaces it
//!   where the protocol carries one ([`LongOperation::suggested_poll`], and
//!   `grpc-retry-pushback-ms` on a failed poll). A poll that fails in a way that passes
//!   (`UNAVAILABLE`, `DEADLINE_EXCEEDED`, `RESOURCE_EXHAUSTED`, `ABORTED`) is sent
//!   again; the loop stops before a wait the scope's budget, or the follow's own
//!   [`limit`](Follow::limit) ([`DEFAULT_FOLLOW_LIMIT`] unless set), cannot hold
//!   ([`FollowError::BudgetSpent`]: the operation runs on). A follow outside any budget
//!   ends by that limit too.
//! * When the scope is cancelled, the cancel RPC is sent once, outside the scope and
//!   under its own bound ([`Follow::cancel_timeout`], [`DEFAULT_CANCEL_TIMEOUT`]), and
//!   [`FollowError::Cancelled`] says what it came to ([`CancelSent`]); cancelled before
//!   anything was sent, nothing is sent.
//!
//! SW4RM's status RPCs are unary (no status stream for tasks or workflows), and their
//! answers carry no poll hint; both hooks are there for services that have them.

mod operation;
mod outcome;
mod run;

pub use operation::{LongOperation, SchedulerTask, Submitted};
pub use outcome::{CancelSent, FollowError, Followed};
pub use run::{
    Follow, DEFAULT_CANCEL_TIMEOUT, DEFAULT_FOLLOW_LIMIT, DEFAULT_NOT_FOUND_SETTLE, NOT_FOUND_POLLS,
};
