//! Submit once, then follow: operations that outlive a request (a scheduler task, a
//! workflow) submitted **once** under their profile, then followed by their status
//! RPC until a terminal state, inside the budget of the scope they run in.
//!
//! * The submit is sent once, never again. A submit whose answer is lost (a timeout
//!   after it was sent, a connection cut: [`crate::CallEffect::MutationIndeterminate`])
//!   is followed by status with the same id, not re-sent; if the status RPC does not
//!   know the operation (`NOT_FOUND`), it did not take effect
//!   ([`FollowError::NotTaken`]: safe to submit again). A submit that never reached the
//!   transport is [`FollowError::NotSubmitted`].
//! * Polls come at an interval that starts at [`Follow::poll_every`] and grows up to
//!   a ceiling, each wait half fixed and half random; a server's suggestion replaces it
//!   where the protocol carries one ([`LongOperation::suggested_poll`], and
//!   `grpc-retry-pushback-ms` on a failed poll). A poll that fails in a way that passes
//!   (`UNAVAILABLE`, `DEADLINE_EXCEEDED`, `RESOURCE_EXHAUSTED`, `ABORTED`) is sent
//!   again; the loop stops before a wait the scope's budget cannot hold
//!   ([`FollowError::BudgetSpent`]: the operation runs on).
//! * When the scope is cancelled, the cancel RPC is sent once, outside the scope, and
//!   [`FollowError::Cancelled`] says what it came to ([`CancelSent`]); cancelled before
//!   anything was sent, nothing is sent.
//!
//! SW4RM's status RPCs are unary (no status stream for tasks or workflows), and their
//! answers carry no poll hint; both hooks are there for services that have them.

mod operation;
mod run;

pub use operation::{LongOperation, SchedulerTask, Submitted};
pub use run::{CancelSent, Follow, FollowError, Followed};
