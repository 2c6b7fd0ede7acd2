//! Cancelling a delegation (SW4-004 §5): [`DelegationCancel`] sends
//! `CancelDelegation` (`send.rs`) and reports what it came to ([`CancelOutcome`],
//! `outcome.rs`); `grace.rs` is the grace rule every side applies, `book.rs` the
//! cancellation book the delegate keeps.

pub(crate) mod book;
mod grace;
pub(crate) mod outcome;
mod send;

pub use grace::{child_grace, effective_grace, MIN_CANCEL_GRACE};
pub use outcome::{
    CancelOutcome, CANCEL_OUTCOME_KEY, CANCEL_WAIT_KEY, ENDED_FORCED, ENDED_IN_GRACE, WAIT_ENDED,
};
pub use send::{CancelReport, CancelWait, DelegationCancel};
