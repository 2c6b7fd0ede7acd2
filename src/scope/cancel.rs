//! The cancel signal of a scope: set once, with a [`CancelReason`], when the inbound
//! call is cancelled or its deadline passes, when an operation budget is cancelled on
//! purpose, when a delegation is cancelled, or when a parent signal is. A check is one
//! atomic load; waiting registers with a `Notify` made on first wait, so a signal
//! nobody waits on costs one allocation (its own) and no lock.
//!
//! Signals form a tree: a child made under a parent is cancelled with it (the parent
//! keeps weak links to its children, pruned as they go). A signal can have two parents
//! (a budget run inside a handler: cancelled by either).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{fence, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::task::{Context, Poll};

use tokio::sync::futures::OwnedNotified;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::policy::cancel::CancelReason;

/// One scope's cancel signal.
#[derive(Default)]
pub struct CancelSignal {
    /// 0 while live; then the reason's code, set once.
    reason: AtomicU8,
    /// Made by the first waiter.
    notify: OnceLock<Arc<Notify>>,
    /// Signals cancelled with this one.
    children: Mutex<Vec<Weak<CancelSignal>>>,
    /// What runs once when it is cancelled (SW4-004 cascades to the handoffs made in
    /// the scope); dropped with the signal otherwise.
    hooks: Mutex<Vec<Hook>>,
    /// When the grace of a cancelled delegation ends (its delegator's
    /// `CancelDelegation`), passed on to children cancelled with it.
    grace_until: OnceLock<Instant>,
    /// When the cancel was made (on the runtime's clock), passed on to children: a
    /// call's task may first see it later, on a busy runtime, and the earlier of this
    /// and its deadline decides how the call ends.
    cancelled_at: OnceLock<Instant>,
}

/// Something to do when a signal is cancelled: given the reason, and the end of the
/// grace the work was given, when its delegator cancelled it.
pub type Hook = Box<dyn FnOnce(CancelReason, Option<Instant>) + Send>;

impl std::fmt::Debug for CancelSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelSignal")
            .field("reason", &self.reason())
            .finish_non_exhaustive()
    }
}

impl CancelSignal {
    /// A live signal with no parent.
    pub(crate) fn new() -> Arc<CancelSignal> {
        Arc::new(CancelSignal::default())
    }

    /// A live signal cancelled with any of `parents` (already cancelled if one is).
    pub(crate) fn child_of<'a>(
        parents: impl IntoIterator<Item = &'a Arc<CancelSignal>>,
    ) -> Arc<CancelSignal> {
        let child = CancelSignal::new();
        for parent in parents {
            parent.adopt(&child);
        }
        child
    }

    /// Links `child` to be cancelled with `self` (at once, if `self` already is).
    pub(crate) fn adopt(&self, child: &Arc<CancelSignal>) {
        let inherited = {
            let mut children = self.children.lock().unwrap_or_else(|e| e.into_inner());
            match self.reason() {
                Some(reason) => Some(reason),
                None => {
                    // Drop the links of children gone before growing the list.
                    if children.len() == children.capacity() {
                        children.retain(|c| c.strong_count() > 0);
                    }
                    children.push(Arc::downgrade(child));
                    None
                }
            }
        };
        if let Some(reason) = inherited {
            child.cancel(reason);
        }
    }

    /// Cancels the signal and its children with `reason`; `false` when it was
    /// cancelled already (the first reason stays).
    pub(crate) fn cancel(&self, reason: CancelReason) -> bool {
        self.cancel_within(reason, None)
    }

    /// Cancels as [`cancel`](Self::cancel) does, with the work's grace ending at
    /// `grace_until` (a delegation cancelled by its delegator): the signal's hooks and
    /// children see it.
    pub(crate) fn cancel_within(&self, reason: CancelReason, grace_until: Option<Instant>) -> bool {
        self.cancel_at(reason, grace_until, Instant::now())
    }

    /// Cancels as [`cancel_within`](Self::cancel_within) does, the cancel made at `at`.
    fn cancel_at(&self, reason: CancelReason, grace_until: Option<Instant>, at: Instant) -> bool {
        if self
            .reason
            .compare_exchange(0, reason.code(), Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        let _ = self.cancelled_at.set(at);
        if let Some(until) = grace_until {
            let _ = self.grace_until.set(until);
        }
        // Pairs with the fence in `Watch::poll`: either the waiter sees the reason, or
        // this sees its `Notify` and wakes it.
        fence(Ordering::SeqCst);
        if let Some(notify) = self.notify.get() {
            notify.notify_waiters();
        }
        let children = {
            let mut list = self.children.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::take(&mut *list)
        };
        let grace_until = self.grace_until();
        for child in children.iter().filter_map(Weak::upgrade) {
            child.cancel_at(reason, grace_until, at);
        }
        let hooks = {
            let mut list = self.hooks.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::take(&mut *list)
        };
        for hook in hooks {
            hook(reason, grace_until);
        }
        true
    }

    /// When the cancel was made, once it was.
    pub(crate) fn cancelled_at(&self) -> Option<Instant> {
        self.cancelled_at.get().copied()
    }

    /// When the grace of a delegation cancelled by its delegator ends, once it was.
    pub(crate) fn grace_until(&self) -> Option<Instant> {
        self.grace_until.get().copied()
    }

    /// Runs `hook` when the signal is cancelled (now, if it already is).
    pub fn on_cancel(&self, hook: Hook) {
        let now = {
            let mut hooks = self.hooks.lock().unwrap_or_else(|e| e.into_inner());
            match self.reason() {
                Some(reason) => Some((hook, reason)),
                None => {
                    hooks.push(hook);
                    None
                }
            }
        };
        if let Some((hook, reason)) = now {
            hook(reason, self.grace_until());
        }
    }

    /// Why it was cancelled; `None` while live (one atomic load).
    #[inline]
    pub fn reason(&self) -> Option<CancelReason> {
        match self.reason.load(Ordering::Acquire) {
            0 => None,
            code => CancelReason::from_code(code),
        }
    }

    /// Hooks waiting for a cancel (for leak checks).
    #[cfg(test)]
    pub(crate) fn waiting_hooks(&self) -> usize {
        self.hooks.lock().map(|h| h.len()).unwrap_or(0)
    }

    /// Children still linked (for leak checks).
    #[cfg(test)]
    pub(crate) fn linked_children(&self) -> usize {
        let children = self.children.lock().unwrap_or_else(|e| e.into_inner());
        children.iter().filter(|c| c.strong_count() > 0).count()
    }
}

/// Waits for a signal: registers on the first poll that has to wait.
#[derive(Debug)]
pub struct Watch {
    signal: Arc<CancelSignal>,
    waiting: Option<Pin<Box<OwnedNotified>>>,
}

impl Watch {
    /// A watch on `signal`.
    pub fn new(signal: Arc<CancelSignal>) -> Self {
        Watch {
            signal,
            waiting: None,
        }
    }

    /// The reason, now (one atomic load).
    #[inline]
    pub fn reason(&self) -> Option<CancelReason> {
        self.signal.reason()
    }

    /// When the cancel was made, once it was.
    pub(crate) fn cancelled_at(&self) -> Option<Instant> {
        self.signal.cancelled_at()
    }

    /// Ready with the reason once the signal is cancelled.
    pub fn poll(&mut self, cx: &mut Context<'_>) -> Poll<CancelReason> {
        loop {
            if let Some(reason) = self.signal.reason() {
                self.waiting = None;
                return Poll::Ready(reason);
            }
            let waiting = match &mut self.waiting {
                Some(w) => w,
                None => {
                    let notify = self.signal.notify.get_or_init(Default::default).clone();
                    let mut notified = Box::pin(notify.notified_owned());
                    notified.as_mut().enable();
                    fence(Ordering::SeqCst);
                    self.waiting.insert(notified)
                }
            };
            if let Some(reason) = self.signal.reason() {
                self.waiting = None;
                return Poll::Ready(reason);
            }
            match waiting.as_mut().poll(cx) {
                // Woken: the reason is set (read at the top).
                Poll::Ready(()) => self.waiting = None,
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Poll;

    #[tokio::test]
    async fn a_cancel_reaches_children_and_wakes_waiters_once() {
        let root = CancelSignal::new();
        let child = CancelSignal::child_of([&root]);
        let grandchild = CancelSignal::child_of([&child]);
        let mut watch = Watch::new(grandchild.clone());
        std::future::poll_fn(|cx| {
            assert!(watch.poll(cx).is_pending());
            Poll::Ready(())
        })
        .await;
        let waiter = tokio::spawn(async move { std::future::poll_fn(|cx| watch.poll(cx)).await });
        assert!(root.cancel(CancelReason::CallerGone));
        assert_eq!(waiter.await.ok(), Some(CancelReason::CallerGone));
        // The first reason stays.
        assert!(!child.cancel(CancelReason::BudgetCancelled));
        assert_eq!(grandchild.reason(), Some(CancelReason::CallerGone));
        assert_eq!(root.linked_children(), 0, "links are taken by the cancel");
    }

    #[test]
    fn hooks_run_once_on_cancel_or_at_once_when_late() {
        use std::sync::atomic::AtomicUsize;
        let ran = Arc::new(AtomicUsize::new(0));
        let signal = CancelSignal::new();
        let counted = |ran: &Arc<AtomicUsize>| {
            let ran = ran.clone();
            Box::new(move |r: CancelReason, _| {
                assert_eq!(r, CancelReason::DelegationCancelled);
                ran.fetch_add(1, Ordering::SeqCst);
            }) as Hook
        };
        signal.on_cancel(counted(&ran));
        assert_eq!((ran.load(Ordering::SeqCst), signal.waiting_hooks()), (0, 1));
        signal.cancel(CancelReason::DelegationCancelled);
        signal.cancel(CancelReason::DelegationCancelled);
        assert_eq!((ran.load(Ordering::SeqCst), signal.waiting_hooks()), (1, 0));
        signal.on_cancel(counted(&ran));
        assert_eq!(ran.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_child_of_a_cancelled_parent_starts_cancelled_and_a_live_child_stays_live() {
        let parent = CancelSignal::new();
        let other = CancelSignal::new();
        let live = CancelSignal::child_of([&parent, &other]);
        other.cancel(CancelReason::DelegationCancelled);
        assert_eq!(live.reason(), Some(CancelReason::DelegationCancelled));
        assert_eq!(
            parent.reason(),
            None,
            "a child's cancel never reaches its parent"
        );
        parent.cancel(CancelReason::InboundDeadline);
        let late = CancelSignal::child_of([&parent]);
        assert_eq!(late.reason(), Some(CancelReason::InboundDeadline));
    }

    #[test]
    fn links_to_dropped_children_are_pruned() {
        let parent = CancelSignal::new();
        for _ in 0..10_000 {
            drop(CancelSignal::child_of([&parent]));
        }
        let kept = CancelSignal::child_of([&parent]);
        let len = parent
            .children
            .lock()
            .map(|c| c.len())
            .unwrap_or(usize::MAX);
        assert!(len <= 8, "{len} links kept for 1 live child");
        assert_eq!(parent.linked_children(), 1);
        drop(kept);
    }
}
