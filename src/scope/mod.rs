//! Deadlines that follow the work across calls: the deadline of an inbound call
//! (agents are servers too) and operation budgets that span many calls and pause
//! while a human decides. Outgoing calls made inside a scope are capped by it: the
//! smallest cap wins, and a timeout's details name it.
//!
//! How to use it:
//!
//! * **Serving calls**: put [`InboundDeadlineLayer`] on your tonic server. Each
//!   handler runs inside the deadline its caller sent (`grpc-timeout`), and every
//!   call it makes gets at most what remains, less a hop offset ([`crate::Propagation`]).
//! * **An operation of many calls**: `OperationBudget::new(total).run(future)` caps
//!   every call made inside; `budget.pause()` stops the clock while a human decides.
//! * **A handoff you received**: `OperationBudget::from_envelope(&request.budget)`
//!   runs the delegated work under what it was handed (SW4-004); handoffs made inside
//!   carry an envelope one hop deeper.
#![cfg_attr(
    feature = "long-work",
    doc = "* **Long work inside a handler** (feature `long-work`): [`LongWork`] runs it \
           under an idle limit and a hard cap; [`progress()`] (anywhere in the work's \
           task, or in work taken along with [`carry`]) resets the idle limit; the \
           handler gets a typed [`Outcome`] with what the work produced, and the status \
           to answer."
)]
#![cfg_attr(
    not(feature = "long-work"),
    doc = "* **Long work inside a handler**: `LongWork`, with the feature `long-work`."
)]
//! * **Work moved to another task**: what the handler (or the future given to
//!   [`OperationBudget::run`]) awaits in its own task sees the scope by itself;
//!   `tokio::spawn`ed work, a channel to a worker, or a future polled elsewhere does
//!   not. Wrap it with [`carry`] to take the scope along, or with [`detach`] to run it
//!   under no inherited deadline and no budget on purpose (cleanup that must outlive
//!   the caller).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::time::Duration;
//! use sw4rm_timeouts::{scope, OperationBudget};
//! let budget = OperationBudget::new(Duration::from_secs(30));
//! budget.run(async {
//!     // Calls made here are capped by what remains of the 30 s.
//!     let worker = tokio::spawn(scope::carry(async { /* ...and here too */ }));
//!     worker.await.unwrap();
//! }).await;
//! # }
//! ```

// Reading order (for contributors): `task.rs` (the scope a task runs in, carried or
// left) → `server.rs` (the tower layer for tonic servers: reads the inbound
// `grpc-timeout`, opens the scope for the handler, enforces it; `server_span.rs`, the
// handler's server span and the ids it names) → `operation_budget.rs` (the
// operation budget, its pause guard, and budgets read from envelopes). The arithmetic
// is in `policy/inherit.rs` and `policy/envelope.rs`; the client layer reads the
// scope when it plans a call. `health.rs` (feature `health`: a serving agent's health
// from its own heartbeats) stands apart from the scope.

pub(crate) mod cancel;
pub(crate) mod cancelled;
pub(crate) mod caps;
#[cfg(feature = "health")]
#[cfg_attr(docsrs, doc(cfg(feature = "health")))]
pub mod health;
#[cfg(feature = "long-work")]
mod long_stream;
#[cfg(feature = "long-work")]
mod long_work;
pub(crate) mod operation_budget;
#[cfg(feature = "long-work")]
mod outcome;
#[cfg(feature = "long-work")]
mod output;
#[cfg(feature = "long-work")]
mod progress;
mod server;
mod server_span;
pub(crate) mod task;
#[cfg(feature = "long-work")]
mod work_state;
mod wrap_up;

pub use cancelled::{cancel_reason, cancelled, is_cancelled, Cancelled};
#[cfg(feature = "long-work")]
#[cfg_attr(docsrs, doc(cfg(feature = "long-work")))]
pub use long_stream::{Frame, ProgressStream};
#[cfg(feature = "long-work")]
#[cfg_attr(docsrs, doc(cfg(feature = "long-work")))]
pub use long_work::{LongWork, Output, DEFAULT_STREAM_BUFFER};
pub use operation_budget::{EnvelopeError, OperationBudget, PauseGuard, DEFAULT_MAX_CLOCK_SKEW};
#[cfg(feature = "long-work")]
#[cfg_attr(docsrs, doc(cfg(feature = "long-work")))]
pub use outcome::{Ending, Outcome};
#[cfg(feature = "long-work")]
#[cfg_attr(docsrs, doc(cfg(feature = "long-work")))]
pub use progress::{progress, progress_at};
pub use server::{
    InboundDeadline, InboundDeadlineFuture, InboundDeadlineLayer, InboundDeadlineService,
};
pub use task::{carry, current_deadline, detach, with_deadline, Scope, Scoped};
pub use wrap_up::{remaining, should_wrap_up, wrap_up_notice, WrapUpNotice};

pub(crate) use cancel::{CancelSignal, Watch};
pub(crate) use caps::{BudgetNow, Current, Tightened};
pub(crate) use task::current;
