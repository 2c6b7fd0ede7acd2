//! The scope a task runs in: an inherited deadline and an operation budget, kept in
//! a tokio task-local so that calls made anywhere in the task's own async flow see
//! them without being passed anything.

use std::future::Future;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::time::Instant;

use super::cancel::CancelSignal;
use super::caps::Current;
use super::operation_budget::OperationBudget;
#[cfg(feature = "long-work")]
use super::work_state::WorkState;

/// What a task's outgoing calls are capped by (opaque: see [`carry`], [`detach`],
/// [`with_deadline`] and [`OperationBudget::run`]).
#[derive(Clone, Debug, Default)]
pub struct Scope {
    pub(crate) deadline: Option<Instant>,
    pub(crate) budget: Option<OperationBudget>,
    /// The budgets `budget` runs inside (a budget run in another's scope), outermost
    /// first: each still caps the calls, as budgets only shrink.
    pub(crate) outer_budgets: Option<Arc<[OperationBudget]>>,
    /// The long work the task reports progress to ([`super::LongWork`]).
    #[cfg(feature = "long-work")]
    pub(crate) work: Option<Arc<WorkState>>,
    /// The cancel signal of the inbound call the task serves, when the server layer
    /// opened the scope.
    pub(crate) inbound: Option<Arc<CancelSignal>>,
    /// The scope's cancel signal: the inbound call's, a budget's, or one made from
    /// both (cancelled by either).
    pub(crate) cancel: Option<Arc<CancelSignal>>,
    /// How long the inbound call's caller accepts a stream going quiet
    /// (`sw4rm-stream-idle-ms`), when it said (what a long-work stream keeps under).
    #[cfg(feature = "long-work")]
    pub(crate) caller_quiet: Option<std::time::Duration>,
    /// When the inbound call's handler is told to wrap up
    /// ([`super::InboundDeadlineLayer::with_wrap_up`]).
    pub(crate) wrap_up_at: Option<Instant>,
    /// The inbound call's path (`/package.Service/Method`), when the server layer
    /// opened the scope: a long-work guard's status names it.
    #[cfg(feature = "long-work")]
    pub(crate) rpc: Option<http::uri::PathAndQuery>,
}

tokio::task_local! {
    static SCOPE: Scope;
}

/// Whether any scope was ever entered in this process: until one is, no task is in
/// one, and a call's lookup of its scope is one load instead of the task-local's.
static ENTERED: AtomicBool = AtomicBool::new(false);

/// `future` inside `scope`. Every scope is entered here.
fn enter<F: Future>(scope: Scope, future: F) -> Scoped<F> {
    // Seen by every task the future runs in: spawning it or polling it there
    // synchronizes with this thread. Written once, so that the calls' loads of it
    // share its cache line instead of losing it to every scope entered.
    if !ENTERED.load(Ordering::Relaxed) {
        ENTERED.store(true, Ordering::Release);
    }
    SCOPE.scope(scope, future)
}

/// A future running inside a scope (see [`carry`], [`detach`], [`with_deadline`] and
/// [`OperationBudget::run`]).
pub type Scoped<F> = tokio::task::futures::TaskLocalFuture<Scope, F>;

/// The caps of the current task's scope, at `now`, and its cancel signal; `None`s
/// outside any scope (one load while no scope was ever entered, one task-local lookup
/// after).
#[inline]
pub fn current(now: Instant) -> (Option<Current>, Option<Arc<CancelSignal>>) {
    if !ENTERED.load(Ordering::Acquire) {
        return (None, None);
    }
    in_scope(now)
}

/// [`current`] once a scope was entered: the task-local lookup, out of line.
#[inline(never)]
fn in_scope(now: Instant) -> (Option<Current>, Option<Arc<CancelSignal>>) {
    SCOPE
        .try_with(|s| {
            let cancel = s.cancel.clone();
            if s.deadline.is_none() && s.budget.is_none() {
                return (None, cancel);
            }
            let caps = Current {
                inherited: s.deadline.map(|d| d.saturating_duration_since(now)),
                budget: smallest_budget(s, now),
                delegation: s.budget.as_ref().and_then(OperationBudget::delegation),
            };
            (Some(caps), cancel)
        })
        .unwrap_or_default()
}

fn scope_now() -> Scope {
    SCOPE.try_with(Scope::clone).unwrap_or_default()
}

/// The inherited deadline of the current task, if it serves an inbound call with one
/// (or runs inside [`with_deadline`]).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use tokio::time::{Duration, Instant};
/// assert_eq!(sw4rm_timeouts::scope::current_deadline(), None);
/// let at = Instant::now() + Duration::from_secs(3);
/// let seen = sw4rm_timeouts::scope::with_deadline(at, async {
///     sw4rm_timeouts::scope::current_deadline()
/// }).await;
/// assert_eq!(seen, Some(at));
/// # }
/// ```
pub fn current_deadline() -> Option<Instant> {
    SCOPE.try_with(|s| s.deadline).ok().flatten()
}

/// Runs `future` with outgoing calls capped by `deadline` (the earlier of it and a
/// deadline already in scope). The server layer does this for every handler.
#[must_use = "futures do nothing unless polled"]
pub fn with_deadline<F: Future>(deadline: Instant, future: F) -> Scoped<F> {
    let mut scope = scope_now();
    scope.deadline = Some(scope.deadline.map_or(deadline, |d| d.min(deadline)));
    enter(scope, future)
}

/// Takes the current scope (inherited deadline, budget and cancel signal) and the
/// current `tracing` span along with `future`, for work handed to another task: its
/// calls keep the deadline and join the same trace (their spans are the span's
/// children, and with a trace propagator their `traceparent` says so).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use tokio::time::{Duration, Instant};
/// use sw4rm_timeouts::scope;
/// let at = Instant::now() + Duration::from_secs(3);
/// scope::with_deadline(at, async move {
///     let job = tokio::spawn(scope::carry(async { scope::current_deadline() }));
///     assert_eq!(job.await.unwrap(), Some(at));
///     // Without `carry` a spawned task starts outside any scope.
///     assert_eq!(tokio::spawn(async { scope::current_deadline() }).await.unwrap(), None);
/// }).await;
/// # }
/// ```
#[must_use = "futures do nothing unless polled"]
pub fn carry<F: Future>(future: F) -> Scoped<tracing::instrument::Instrumented<F>> {
    use tracing::Instrument as _;
    enter(scope_now(), future.in_current_span())
}

/// Runs `future` outside any scope: no inherited deadline, no budget, no cancel signal
/// (work that must outlive the inbound call, such as cleanup or an audit record: its
/// outgoing calls are not cancelled when the caller goes away).
#[must_use = "futures do nothing unless polled"]
pub fn detach<F: Future>(future: F) -> Scoped<F> {
    enter(Scope::default(), future)
}

/// Runs `future` reporting progress to `work` (see [`super::progress()`]).
#[cfg(feature = "long-work")]
pub(crate) fn with_work<F: Future>(work: Arc<WorkState>, future: F) -> Scoped<F> {
    let mut scope = scope_now();
    scope.work = Some(work);
    enter(scope, future)
}

/// Runs the handler of an inbound call under `deadline` (if any), cancelled with
/// `call` (a signal made by [`inbound_signal`]).
#[cfg(feature = "long-work")]
pub(crate) fn serving<F: Future>(
    deadline: Option<Instant>,
    call: Arc<CancelSignal>,
    future: F,
) -> Scoped<F> {
    serving_quiet(deadline, None, None, call, future)
}

/// [`serving`], with how long the caller accepts a stream going quiet, if it said,
/// and when its handler is told to wrap up, if the layer says.
#[cfg(any(feature = "long-work", test))]
pub(crate) fn serving_quiet<F: Future>(
    deadline: Option<Instant>,
    caller_quiet: Option<std::time::Duration>,
    wrap_up_at: Option<Instant>,
    call: Arc<CancelSignal>,
    future: F,
) -> Scoped<F> {
    serving_rpc(None, deadline, caller_quiet, wrap_up_at, call, future)
}

/// The inbound call's path in the current scope, when the server layer opened it.
#[cfg(feature = "long-work")]
pub(crate) fn current_rpc() -> Option<http::uri::PathAndQuery> {
    SCOPE.try_with(|s| s.rpc.clone()).ok().flatten()
}

/// [`serving_quiet`] for the inbound call to `rpc`.
pub(crate) fn serving_rpc<F: Future>(
    rpc: Option<http::uri::PathAndQuery>,
    deadline: Option<Instant>,
    caller_quiet: Option<std::time::Duration>,
    wrap_up_at: Option<Instant>,
    call: Arc<CancelSignal>,
    future: F,
) -> Scoped<F> {
    let mut scope = scope_now();
    #[cfg(feature = "long-work")]
    {
        if rpc.is_some() {
            scope.rpc = rpc;
        }
        scope.caller_quiet = caller_quiet.or(scope.caller_quiet);
    }
    // Nothing reads them without long work (the server layer passes `None`s).
    #[cfg(not(feature = "long-work"))]
    let _ = (rpc, caller_quiet);
    if let Some(at) = wrap_up_at {
        scope.wrap_up_at = Some(scope.wrap_up_at.map_or(at, |w| w.min(at)));
    }
    if let Some(at) = deadline {
        scope.deadline = Some(scope.deadline.map_or(at, |d| d.min(at)));
    }
    scope.inbound = Some(call.clone());
    scope.cancel = Some(call);
    enter(scope, future)
}

/// A new inbound call's signal: a child of the current scope's, if any.
pub(crate) fn inbound_signal() -> Arc<CancelSignal> {
    with_current_cancel(|parent| CancelSignal::child_of([parent])).unwrap_or_else(CancelSignal::new)
}

/// How long the inbound call's caller accepts a stream going quiet, if it said.
#[cfg(feature = "long-work")]
pub(crate) fn current_caller_quiet() -> Option<std::time::Duration> {
    SCOPE.try_with(|s| s.caller_quiet).ok().flatten()
}

/// The cancel signal of the inbound call the current task serves, if the server layer
/// opened its scope.
#[cfg(feature = "long-work")]
pub(crate) fn current_inbound() -> Option<Arc<CancelSignal>> {
    SCOPE.try_with(|s| s.inbound.clone()).ok().flatten()
}

/// Calls `f` with the current scope's cancel signal, if any (no clone).
pub(crate) fn with_current_cancel<R>(f: impl FnOnce(&Arc<CancelSignal>) -> R) -> Option<R> {
    SCOPE.try_with(|s| s.cancel.as_ref().map(f)).ok().flatten()
}

/// Calls `f` with the current task's scope, if it runs in one (no clone).
pub(crate) fn with_current_scope<R>(f: impl FnOnce(&Scope) -> R) -> Option<R> {
    SCOPE.try_with(f).ok()
}

/// Calls `f` with the long work the current task reports to, if any (no clone).
#[cfg(feature = "long-work")]
pub(crate) fn with_current_work<R>(f: impl FnOnce(&WorkState) -> R) -> Option<R> {
    SCOPE.try_with(|s| s.work.as_deref().map(f)).ok().flatten()
}

/// The budget of `scope` with the least left at `now`, among its own and those it
/// runs inside (a paused one caps nothing while it is paused).
fn smallest_budget(scope: &Scope, now: Instant) -> Option<super::caps::BudgetNow> {
    let own = scope.budget.as_ref().and_then(|b| b.cap_at(now));
    let outer = scope.outer_budgets.as_deref().unwrap_or_default();
    outer
        .iter()
        .filter_map(|b| b.cap_at(now))
        .chain(own)
        .min_by_key(|b| b.remaining)
}

/// What is left of the scope's budgets at `now`: the least, among its own and those
/// it runs inside (`None` without a budget, or when none has a limit).
pub(crate) fn budgets_remaining(scope: &Scope) -> Option<std::time::Duration> {
    let outer = scope.outer_budgets.as_deref().unwrap_or_default();
    scope
        .budget
        .iter()
        .chain(outer)
        .map(OperationBudget::remaining)
        .filter(|d| *d != std::time::Duration::MAX)
        .min()
}

impl OperationBudget {
    /// Runs `future` with every outgoing call capped by this budget (inside any
    /// inherited deadline already in scope), and cancelled with the budget or the
    /// enclosing scope.
    #[must_use = "futures do nothing unless polled"]
    pub fn run<F: Future>(&self, future: F) -> Scoped<F> {
        let mut scope = scope_now();
        // The budget's own signal is the scope's (what is remembered on it lives as
        // long as the budget), cancelled with the budget, or with the scope it is run
        // in (the budget's work is part of that scope's).
        let signal = self.signal().clone();
        if let Some(parent) = &scope.cancel {
            parent.adopt(&signal);
        }
        scope.cancel = Some(signal);
        // A budget run inside another's scope: the outer one still caps its calls.
        if let Some(outer) = scope.budget.replace(self.clone()) {
            let mut all = scope.outer_budgets.as_deref().unwrap_or_default().to_vec();
            all.push(outer);
            scope.outer_budgets = Some(all.into());
        }
        enter(scope, future)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Outside any scope a task has none, before and after a scope is entered
    /// anywhere; inside one it has that scope's deadline.
    #[tokio::test(start_paused = true)]
    async fn a_task_has_the_scope_it_runs_in_and_none_outside() {
        let now = Instant::now();
        assert!(matches!(current(now), (None, None)), "no scope yet");
        let deadline = now + Duration::from_secs(5);
        let inside = with_deadline(deadline, async { current(Instant::now()).0 }).await;
        let inherited = inside.and_then(|caps| caps.inherited);
        assert_eq!(inherited, Some(Duration::from_secs(5)));
        assert!(matches!(current(now), (None, None)), "outside again");
        let spawned = tokio::spawn(async { current(Instant::now()).0.is_none() });
        assert!(spawned.await.unwrap(), "a task spawned outside any scope");
    }
}
