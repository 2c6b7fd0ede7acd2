//! The wrap-up notice where work asks for it: [`should_wrap_up`] (a flag, cheap as
//! [`super::progress()`]), [`wrap_up_notice`] (a future to select on), and
//! [`remaining`] (the time the scope has left), for long work under a
//! [`super::LongWork`] with a wrap-up and for work under an
//! [`super::OperationBudget`] with one.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

use super::operation_budget::OperationBudget;
use super::task::with_current_scope;

/// Whether the current task's work has been told to wrap up: its
/// `LongWork`'s notice has come (feature `long-work`) (`cap − reserve`), the inbound call it serves
/// has only its reserve left ([`super::InboundDeadlineLayer::with_wrap_up`]), or its
/// [`OperationBudget`] has. `false` outside such a scope.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use std::time::Duration;
/// use sw4rm_timeouts::{scope, OperationBudget, WrapUp};
/// let budget = OperationBudget::new(Duration::from_secs(10)).with_wrap_up(WrapUp::share(30));
/// let calls = budget.run(async {
///     let mut calls = 0;
///     while !scope::should_wrap_up() {
///         tokio::time::sleep(Duration::from_secs(1)).await; // one sub-call
///         calls += 1;
///     }
///     calls // then summarize what the calls found
/// }).await;
/// assert_eq!(calls, 7);
/// # }
/// ```
pub fn should_wrap_up() -> bool {
    if long_work_wrapping_up() {
        return true;
    }
    with_current_scope(|s| {
        s.wrap_up_at.is_some_and(|at| Instant::now() >= at)
            || s.budget
                .as_ref()
                .is_some_and(OperationBudget::should_wrap_up)
    })
    .unwrap_or(false)
}

/// A future ready once the current task's work is told to wrap up (see
/// [`should_wrap_up`]); never outside a scope with a wrap-up. Take it in the work's
/// task.
pub fn wrap_up_notice() -> WrapUpNotice {
    let work = long_work_notice();
    let inbound = with_current_scope(|s| s.wrap_up_at).flatten();
    // A fixed notice (the long work's, the inbound call's), the earlier of the two;
    // else the budget's, which moves with its pauses.
    if let Some(at) = [work, inbound].into_iter().flatten().min() {
        return WrapUpNotice::at(at);
    }
    with_current_scope(|s| s.budget.clone())
        .flatten()
        .map_or(WrapUpNotice::never(), WrapUpNotice::budget)
}

/// Whether the current task's long work has been told to wrap up.
#[cfg(feature = "long-work")]
fn long_work_wrapping_up() -> bool {
    super::task::with_current_work(|w| w.wrapping_up()) == Some(true)
}

/// When the current task's long work is told to wrap up, if it has a wrap-up.
#[cfg(feature = "long-work")]
fn long_work_notice() -> Option<Instant> {
    super::task::with_current_work(|w| w.notice()).flatten()
}

/// No long work without its feature.
#[cfg(not(feature = "long-work"))]
fn long_work_wrapping_up() -> bool {
    false
}

/// No long work without its feature.
#[cfg(not(feature = "long-work"))]
fn long_work_notice() -> Option<Instant> {
    None
}

/// What the current task's scope has left: the smaller of its inherited deadline and
/// its operation budget (frozen while the budget is paused); `None` outside a scope
/// with either.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use std::time::Duration;
/// use sw4rm_timeouts::{scope, OperationBudget};
/// assert_eq!(scope::remaining(), None);
/// let left = OperationBudget::new(Duration::from_secs(30)).run(async {
///     tokio::time::sleep(Duration::from_secs(5)).await;
///     scope::remaining()
/// }).await;
/// assert_eq!(left, Some(Duration::from_secs(25)));
/// # }
/// ```
pub fn remaining() -> Option<Duration> {
    let now = Instant::now();
    with_current_scope(|s| {
        let inherited = s.deadline.map(|d| d.saturating_duration_since(now));
        let budget = super::task::budgets_remaining(s);
        match (inherited, budget) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    })
    .flatten()
}

// The notice is a wrap-up's, asked of a budget: it lives here, so the budget does not
// know of the notice.
impl OperationBudget {
    /// Ready once the work under the budget is told to wrap up (never without
    /// [`with_wrap_up`](Self::with_wrap_up)); a pause moves it later.
    pub fn wrap_up_notice(&self) -> WrapUpNotice {
        WrapUpNotice::budget(self.clone())
    }
}

/// Ready once work is told to wrap up ([`wrap_up_notice`],
/// [`OperationBudget::wrap_up_notice`], and long work's `Output::wrap_up_notice`).
#[must_use = "futures do nothing unless polled"]
pub struct WrapUpNotice {
    kind: Kind,
}

enum Kind {
    Never,
    At(Pin<Box<Sleep>>),
    /// A budget's notice moves with its pauses: asked again each time it wakes.
    Budget(OperationBudget, Option<Pin<Box<Sleep>>>),
}

impl std::fmt::Debug for WrapUpNotice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.kind {
            Kind::Never => "never",
            Kind::At(_) => "at",
            Kind::Budget(..) => "budget",
        };
        f.debug_struct("WrapUpNotice").field("kind", &kind).finish()
    }
}

impl WrapUpNotice {
    pub(crate) fn never() -> Self {
        WrapUpNotice { kind: Kind::Never }
    }

    pub(crate) fn at(at: Instant) -> Self {
        WrapUpNotice {
            kind: Kind::At(Box::pin(tokio::time::sleep_until(at))),
        }
    }

    pub(crate) fn budget(budget: OperationBudget) -> Self {
        WrapUpNotice {
            kind: Kind::Budget(budget, None),
        }
    }
}

impl Future for WrapUpNotice {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match &mut self.get_mut().kind {
            Kind::Never => Poll::Pending,
            Kind::At(sleep) => sleep.as_mut().poll(cx),
            Kind::Budget(budget, sleep) => loop {
                let Some(wait) = budget.until_wrap_up() else {
                    return Poll::Pending;
                };
                if wait.is_zero() {
                    return Poll::Ready(());
                }
                // A wait too long to add to an instant is no notice.
                let Some(at) = Instant::now().checked_add(wait) else {
                    return Poll::Pending;
                };
                let timer = sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
                if timer.deadline() != at {
                    timer.as_mut().reset(at);
                }
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scope::cancel::CancelSignal;
    use crate::scope::task::serving_quiet;

    #[tokio::test(start_paused = true)]
    async fn an_inbound_calls_notice_is_seen_in_its_handler() {
        let start = Instant::now();
        let at = start + Duration::from_secs(2);
        let notice = start + Duration::from_millis(1_500);
        let seen = serving_quiet(Some(at), None, Some(notice), CancelSignal::new(), async {
            let before = should_wrap_up();
            wrap_up_notice().await;
            (before, should_wrap_up(), Instant::now())
        })
        .await;
        assert_eq!(seen, (false, true, notice));
    }
}
