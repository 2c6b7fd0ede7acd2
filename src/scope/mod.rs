//! Deadlines that follow the work across calls: the deadline of an inbound call
//! (agents are servers too) and operation budgets that span many calls and pause
//! while a human decides. Outgoing calls made inside a scope are capped by it.
//!
//! Reading order: `task.rs` (the scope a task runs in, and how to carry it to other
//! tasks or leave it) → `server.rs` (the tower layer for tonic servers that reads the
//! inbound `grpc-timeout`, opens the scope for the handler and enforces it) →
//! `budget.rs` (the operation budget and its pause guard). The arithmetic is in
//! `policy/inherit.rs`; the client layer reads the scope when it plans a
//! call.
//!
//! What flows by itself: everything the handler (or the future given to
//! [`OperationBudget::run`]) awaits in its own task. What does not: work moved to
//! another task (`tokio::spawn`, a channel to a worker, a future stored and polled
//! later elsewhere). Wrap such work with [`carry`] to take the scope along, or with
//! [`detach`] to run it under no inherited deadline and no budget on purpose.

mod budget;
mod server;
mod task;

pub use budget::{EnvelopeError, OperationBudget, PauseGuard, DEFAULT_MAX_CLOCK_SKEW};
pub use server::{
    InboundDeadline, InboundDeadlineFuture, InboundDeadlineLayer, InboundDeadlineService,
};
pub use task::{carry, current_deadline, detach, with_deadline, Scope, Scoped};

pub(crate) use budget::epoch_ms_now;
pub(crate) use task::{current, Current};
