//! The current task's cancel, asked: whether its scope is cancelled ([`is_cancelled`]),
//! why ([`cancel_reason`]), a future ready when it is ([`cancelled`]), and what is left
//! of the grace a delegator gave it. The signal itself is `cancel.rs`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::Instant;

use super::cancel::Watch;
use super::task::with_current_cancel;
use crate::policy::cancel::CancelReason;

/// Whether the current task's scope has been cancelled (one task-local lookup and one
/// atomic load; `false` outside any scope with a cancel signal).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// use sw4rm_timeouts::{scope, CancelReason, OperationBudget};
/// assert!(!scope::is_cancelled());
/// let budget = OperationBudget::new(Duration::from_secs(60));
/// budget.run(async {
///     assert!(!scope::is_cancelled());
///     budget.cancel();
///     assert_eq!(scope::cancel_reason(), Some(CancelReason::BudgetCancelled));
/// }).await;
/// # }
/// ```
pub fn is_cancelled() -> bool {
    cancel_reason().is_some()
}

/// Why the current task's scope was cancelled; `None` while it runs on (or outside
/// any scope with a cancel signal).
pub fn cancel_reason() -> Option<CancelReason> {
    with_current_cancel(|s| s.reason()).flatten()
}

/// A future ready with the reason once the current task's scope is cancelled; outside
/// a scope with a cancel signal it never is. Take it in the scope's task (it holds the
/// signal, so it can be awaited anywhere after):
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// use sw4rm_timeouts::{scope, CancelReason, OperationBudget};
/// let budget = OperationBudget::new(Duration::from_secs(60));
/// let stopped = budget.run(async {
///     let cancelled = scope::cancelled();
///     tokio::select! {
///         reason = cancelled => Err(reason),
///         out = async { tokio::time::sleep(Duration::from_secs(30)).await; 42 } => Ok(out),
///     }
/// });
/// let canceller = budget.clone();
/// tokio::spawn(async move { canceller.cancel() });
/// assert_eq!(stopped.await, Err(CancelReason::BudgetCancelled));
/// # }
/// ```
pub fn cancelled() -> Cancelled {
    Cancelled {
        watch: with_current_cancel(|s| Watch::new(s.clone())),
    }
}

/// The future [`cancelled`] returns.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Cancelled {
    watch: Option<Watch>,
}

impl Future for Cancelled {
    type Output = CancelReason;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<CancelReason> {
        match &mut self.get_mut().watch {
            Some(watch) => watch.poll(cx),
            None => Poll::Pending,
        }
    }
}

/// What is left of the grace the current scope was given when its delegator
/// cancelled it (`None`: not cancelled by a delegator, or outside a scope).
pub fn own_grace_left() -> Option<std::time::Duration> {
    with_current_cancel(|s| s.grace_until())
        .flatten()
        .map(|until| until.saturating_duration_since(Instant::now()))
}
